--[[
  Included (`--- @include`) by claim-7: frees the sessions of workers whose liveness ran out (a
  crash, a SIGKILL, a stall longer than the lease TTL). Their entries leave `workers`, their
  leases leave `own`, and each of their sessions with messages waiting is ready at once. Runs only
  when a worker found a dead one (a claim asks for it at most every few hundred ms), so scanning
  `own` (the leases held now, not every session) is rare work, not per-message work.

  A reaped lease counts as a failed attempt of its batch (`attempts`, keyed by the batch's first
  message id): attempts are written only when a lease ends without an ack (here and in release-5),
  so a claim finds the count of earlier failed claims there and the common turn writes none.

  reapWorkers(workers, own, ready, wake, attempts, mailboxPrefix, now)
  Output: none
]]
--- @include "wake"
--- @include "count-attempt"

local function reapWorkers(workers, own, ready, wake, attempts, mailboxPrefix, now)
  local dead = redis.call("ZRANGEBYSCORE", workers, "-inf", now, "LIMIT", 0, 50)
  if #dead == 0 then
    return
  end
  redis.call("ZREM", workers, unpack(dead))
  local isDead = {}
  for _, worker in ipairs(dead) do
    isDead[worker] = true
  end
  local leases = redis.call("HGETALL", own)
  for index = 1, #leases, 2 do
    local sid, held = leases[index], leases[index + 1]
    local separator = string.find(held, ":", 1, true)
    if separator and isDead[string.sub(held, separator + 1)] then
      redis.call("HDEL", own, sid)
      local first = redis.call("LINDEX", mailboxPrefix .. sid, 0)
      if first then
        countAttempt(attempts, first)
        redis.call("ZADD", ready, "NX", now, sid)
        wakeOne(wake)
      end
    end
  end
end
