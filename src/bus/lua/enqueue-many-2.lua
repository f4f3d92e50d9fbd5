--[[
  Queues the inbound messages a gateway accepted in one moment, each in its session's mailbox, in
  one call: the clock is read, the ready set written and the workers woken once for all of them.

  For each message, in order: its dedupe marker is set, or read when set already (SET NX GET): a
  marker holding this message's id means our own publish replayed after its reply was lost (it is
  queued already and counts as accepted), another id a duplicate (nothing queued). The first
  message of an empty mailbox makes the session ready (due after the debounce) and wakes one
  waiting worker. A mailbox that already held messages belongs to a session that is ready or leased
  already (every script that leaves messages behind readies the session), and a leased session is
  readied by its ack, its release or the reaper of its dead worker: nothing more to do then.

  An empty mailbox is never leased, so the lease is not looked up: a claim leases only sessions with
  messages, and those stay in the mailbox until the script that ends the lease (ack, dead letter)
  trims them, in the same step as it drops the lease. Release and the reaper drop a lease without
  trimming, and ready the session themselves.

  Mailboxes and markers are named by the caller or built from the prefix: they share the hash tag
  of the other keys.
  KEYS[1] ready           ZSET sid -> due time (ms)
  KEYS[2] wake            LIST of wake-up tokens for blocked claimers
  ARGV[1] now (ms), or "" for Redis's clock
  ARGV[2] debounce (ms)
  ARGV[3] mailbox key prefix ("{p}:in:")
  ARGV[4 + 5(i-1) ..] message i: its dedupe marker's key (seen:<channel>:<event>, or queued:<id>
          without a platform event id), the marker's TTL (ms), the message id, the sid, the JSON
  Output: one entry per message, in order: 1 queued (or queued already: a replay), 0 duplicate
]]
--- @include "includes/clock"

local results = {}
local readied = {}
local wakes = {}
for base = 4, #ARGV - 4, 5 do
  local id, sid = ARGV[base + 2], ARGV[base + 3]
  local holder = redis.call("SET", ARGV[base], id, "NX", "PX", ARGV[base + 1], "GET")
  if holder then
    table.insert(results, holder == id and 1 or 0)
  else
    if redis.call("RPUSH", ARGV[3] .. sid, ARGV[base + 4]) == 1 then
      table.insert(readied, sid)
    end
    table.insert(results, 1)
  end
end
if #readied > 0 then
  local due = clockOf(ARGV[1]) + tonumber(ARGV[2])
  local scored = {}
  for _, sid in ipairs(readied) do
    table.insert(scored, due)
    table.insert(scored, sid)
    table.insert(wakes, "1")
  end
  redis.call("ZADD", KEYS[1], "NX", unpack(scored))
  -- One wake-up token per readied session; trimmed only once nobody was waiting for many.
  if redis.call("LPUSH", KEYS[2], unpack(wakes)) > 64 then
    redis.call("LTRIM", KEYS[2], 0, 63)
  end
end
return results
