--[[
  Marks an outbound chunk delivered (or a platform event answered at a gateway: `markEventSeen`,
  on the publish dedupe's seen:<event> key), once across every gateway: the first mark wins. The mark holds
  the marker's own token, so the same call replayed after its reply was lost (the client library
  resends it on the new connection) finds its own token and still counts as the winner; without
  that, the reply would be taken for delivered elsewhere and never sent.

  KEYS[1] sent:<outbound id>#<chunk>, or seen:<channel>:<event id>
  ARGV[1] token of this call (unique)
  ARGV[2] TTL (ms)
  Output: 1 ours to send, 0 already marked by another call
]]
if redis.call("SET", KEYS[1], ARGV[1], "NX", "PX", ARGV[2]) then
  return 1
end
if redis.call("GET", KEYS[1]) == ARGV[1] then
  return 1
end
return 0
