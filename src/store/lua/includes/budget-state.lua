--[[
  Included (`--- @include`) by the budget scripts.

  budgetState(hash, held, now, from)
  hash   budget:<unit>:<scope>       HASH bucket start (ms) -> use; "held" -> total held by reservations
  held   budget:<unit>:<scope>:held  ZSET "<reservation id>:<amount>" -> expiry (ms)
  now    the time (ms); a reservation whose expiry is not after it is released (a crashed worker's)
  from   the window's start (ms): buckets before it no longer count and are dropped
  Output: used in the window, total held, start of the oldest bucket with use (false when none)

  budgetSlots: how many budgets a script takes at most (two keys each).
]]
local budgetSlots = 5

local function budgetState(hash, held, now, from)
  local expired = redis.call("ZRANGEBYSCORE", held, "-inf", now)
  if #expired > 0 then
    local released = 0
    for _, member in ipairs(expired) do
      released = released + tonumber(string.match(member, ":(%d+)$"))
    end
    redis.call("ZREMRANGEBYSCORE", held, "-inf", now)
    redis.call("HINCRBY", hash, "held", -released)
  end
  local fields = redis.call("HGETALL", hash)
  local used, total, oldest = 0, 0, false
  local stale = {}
  for index = 1, #fields, 2 do
    local field, value = fields[index], tonumber(fields[index + 1])
    if field == "held" then
      total = value
    else
      local bucket = tonumber(field)
      if bucket < from then
        table.insert(stale, field)
      else
        used = used + value
        if value > 0 and (not oldest or bucket < oldest) then oldest = bucket end
      end
    end
  end
  if #stale > 0 then redis.call("HDEL", hash, unpack(stale)) end
  return used, total, oldest
end

-- Keeps both keys of a budget at least `keep` ms from now: an idle person's budget goes by itself.
local function keepBudget(hash, held, keep)
  if redis.call("PTTL", hash) < keep then redis.call("PEXPIRE", hash, keep) end
  if redis.call("EXISTS", held) == 1 and redis.call("PTTL", held) < keep then redis.call("PEXPIRE", held, keep) end
end
