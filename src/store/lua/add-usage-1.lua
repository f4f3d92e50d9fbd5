--[[
  Adds a process's summed usage report counts of one day (what its model calls used since its last
  flush) to the day's hash, and keeps the day.

  KEYS[1] usage:<day>  HASH field -> count, the usage report's day
  ARGV[1] how long the day is kept (ms)
  ARGV[2..] field, increment, field, increment, ...
  Output: the number of fields added to
]]
for index = 2, #ARGV, 2 do
  redis.call("HINCRBY", KEYS[1], ARGV[index], ARGV[index + 1])
end
redis.call("PEXPIRE", KEYS[1], ARGV[1])
return (#ARGV - 1) / 2
