--[[
  Gives a leader lease up, only if we still hold it.

  KEYS[1] leader:<name>
  ARGV[1] holder id
  Output: 1 released, 0 not ours
]]
if redis.call("GET", KEYS[1]) == ARGV[1] then
  redis.call("DEL", KEYS[1])
  return 1
end
return 0
