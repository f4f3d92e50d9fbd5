--[[
  Included (`--- @include`) by the scripts that end a turn (ack-many-6, dead-letter-8).

  refusedEnd(own, workers, sid, token, now, done, callId) decides whether this call may end the
  lease: nil when it may (and `done`, done:<token>, now names this call for 10 minutes), else the
  script's reply: 1 when this very call ended it already (a replay after its reply was lost, which
  must succeed without doing anything twice), or the error LEASE_LOST.

  endLease(...) drops the messages the turn consumed, releases the lease and, when more messages
  wait (they arrived mid-turn), makes the session ready at once and wakes a worker. (LPOP with a
  count: Redis 6.2, which the bus needs anyway.)

  endLease(mailbox, ready, own, wake, attempts, sid, consumed, now, firstId, attempt)
  mailbox   in:<sid>  the session's mailbox
  ready     ZSET sid -> due time;  own  HASH sid -> "<token>:<worker>"
  wake      LIST of wake-up tokens;  attempts  HASH first message id -> failed claims
  consumed  messages the turn consumed;  firstId  id of the batch's first message
  attempt   the claim's attempt: above 1, earlier claims failed and left a count to drop (a
            first attempt left none: counts are written only when a lease ends without an ack)
  Output: none
]]
--- @include "lease-held"
--- @include "wake"

local function refusedEnd(own, workers, sid, token, now, done, callId)
  local lost = leaseLost(own, workers, sid, token, now)
  if lost then
    if redis.call("GET", done) == callId then
      return 1
    end
    return redis.error_reply("LEASE_LOST " .. lost)
  end
  redis.call("SET", done, callId, "PX", 600000)
  return nil
end

local function endLease(mailbox, ready, own, wake, attempts, sid, consumed, now, firstId, attempt)
  if tonumber(attempt) ~= 1 then
    redis.call("HDEL", attempts, firstId)
  end
  -- One more than consumed is popped: a message past them means more wait (they arrived
  -- mid-turn), and it goes back to the head. One command where LTRIM and LLEN were two, and the
  -- put-back only when more wait.
  local more
  if consumed > 0 then
    local popped = redis.call("LPOP", mailbox, consumed + 1)
    more = popped and #popped > consumed
    if more then
      redis.call("LPUSH", mailbox, popped[#popped])
    end
  else
    more = redis.call("LLEN", mailbox) > 0
  end
  redis.call("HDEL", own, sid)
  if more then
    redis.call("ZADD", ready, "NX", now, sid)
    wakeOne(wake)
  end
end
