--[[
  Included (`--- @include`) by the scripts that end a turn (ack-7, ack-with-reply-8, dead-letter-8):
  drops the messages the turn consumed, releases the lease and, when more messages wait (they
  arrived mid-turn), makes the session ready at once and wakes a worker.

  endLease(mailbox, ready, lease, own, wake, attempts, sid, consumed, now, firstId)
  mailbox   in:<sid>  the session's mailbox
  ready     ZSET sid -> due time;  lease  ZSET sid -> lease expiry;  own  HASH sid -> token
  wake      LIST of wake-up tokens;  attempts  HASH first message id -> claims
  consumed  messages the turn consumed;  firstId  id of the batch's first message
  Output: none
]]
local function endLease(mailbox, ready, lease, own, wake, attempts, sid, consumed, now, firstId)
  redis.call("HDEL", attempts, firstId)
  if consumed > 0 then
    redis.call("LTRIM", mailbox, consumed, -1)
  end
  redis.call("ZREM", lease, sid)
  redis.call("HDEL", own, sid)
  if redis.call("LLEN", mailbox) > 0 then
    redis.call("ZADD", ready, "NX", now, sid)
    redis.call("LPUSH", wake, "1")
    redis.call("LTRIM", wake, 0, 63)
  end
end
