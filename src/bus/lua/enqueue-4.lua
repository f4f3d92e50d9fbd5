--[[
  Queues an inbound message in its session's mailbox. The first message of an empty mailbox makes
  the session ready (due after the debounce) and wakes one waiting worker. A mailbox that already
  held messages belongs to a session that is ready or leased already (every script that leaves
  messages behind readies the session), and a leased session is readied by its ack, its release or
  the reaper of its dead worker: nothing more to do then.

  An empty mailbox is never leased, so the lease is not looked up: a claim leases only sessions with
  messages, and those stay in the mailbox until the script that ends the lease (ack, dead letter)
  trims them, in the same step as it drops the lease. Release and the reaper drop a lease without
  trimming, and ready the session themselves.

  KEYS[1] in:<sid>        the session's mailbox (LIST of message JSON)
  KEYS[2] ready           ZSET sid -> due time (ms)
  KEYS[3] wake            LIST of wake-up tokens for blocked claimers
  KEYS[4] seen:<event>    dedupe marker: of the platform event, or of the message id when it has none
  ARGV[1] message JSON
  ARGV[2] sid (session key)
  ARGV[3] now (ms), or "" for Redis's clock
  ARGV[4] debounce (ms)
  ARGV[5] dedupe TTL (ms)
  ARGV[6] the message id, stored in the marker
  Output: 1 queued (or queued already by this same message: a replay), 0 duplicate (nothing queued)
]]
--- @include "includes/clock"
--- @include "includes/wake"

-- The marker names the message that set it (SET NX GET: set it, or read whose it is, in one call):
-- our own publish replayed after its reply was lost finds itself, is queued already and counts as
-- accepted; another message is a duplicate.
local holder = redis.call("SET", KEYS[4], ARGV[6], "NX", "PX", ARGV[5], "GET")
if holder then
  if holder == ARGV[6] then
    return 1
  end
  return 0
end
if redis.call("RPUSH", KEYS[1], ARGV[1]) == 1 then
  redis.call("ZADD", KEYS[2], "NX", clockOf(ARGV[3]) + tonumber(ARGV[4]), ARGV[2])
  wakeOne(KEYS[3])
end
return 1
