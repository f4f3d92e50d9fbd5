--[[
  Included (`--- @include`) by the scripts that end a lease without an ack (the reaper, release-5):
  counts one failed claim of the batch that starts with `first`, so the next claim of it reports
  attempt 2, 3, ... A turn that is acked never wrote a count (its claim read none): attempts cost
  nothing on the common path, only when a holder died or gave its batch back.

  countAttempt(attempts, first)
  attempts  HASH first message id -> failed claims of that batch
  first     the batch's first message (JSON), as the mailbox holds it
]]
local function countAttempt(attempts, first)
  redis.call("HINCRBY", attempts, cjson.decode(first)["id"], 1)
end
