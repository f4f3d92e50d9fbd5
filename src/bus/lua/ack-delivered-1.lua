--[[
  Acknowledges delivered outbound entries in one step: XACK (out of the consumer group's pending
  list), XDEL (out of the stream: nothing else reads them), and for each delivered final a marker
  that tells any consumer to skip drafts of that reply still queued behind it.

  KEYS[1] out:<channel>  STREAM of outbound events
  ARGV[1] consumer group
  ARGV[2] prefix of the finished markers ("{p}:finished:"); they share the stream's hash tag
  ARGV[3] how long a finished marker is kept (ms)
  ARGV[4] n, the number of entry ids
  ARGV[5 .. 4+n] entry ids
  ARGV[5+n ..] reply ids of the delivered finals
  Output: the number of entries acknowledged
]]
local count = tonumber(ARGV[4])
local acked = 0
-- unpack() is bounded by Lua's C stack: ack in slices.
for first = 5, 4 + count, 1000 do
  local last = math.min(first + 999, 4 + count)
  acked = acked + redis.call("XACK", KEYS[1], ARGV[1], unpack(ARGV, first, last))
  redis.call("XDEL", KEYS[1], unpack(ARGV, first, last))
end
for index = 5 + count, #ARGV do
  redis.call("SET", ARGV[2] .. ARGV[index], "1", "PX", ARGV[3])
end
return acked
