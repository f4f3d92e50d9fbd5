--[[
  The platform answered the calls one take drew (src/gateway/redis-quota-store.ts `answered`):
  they count from now instead of from the take, so the next call, taken a window later, cannot
  arrive at the platform inside the window of a call that reached it late. A call is never moved
  back in time: a closed budget's filler, or an answer older than its take, leaves it where it is.

  KEYS[1..6] the budgets of the take (as take-12.lua); a slot not used repeats KEYS[1] with limit 0
  ARGV[1]    now (ms), or "" for Redis's clock
  ARGV[2]    token of the take: its members are <token>:<n>
  ARGV[3]    cost the take drew from each budget
  ARGV[4+3(i-1)..6+3(i-1)]  limit, window (ms), reserve of KEYS[i]
  ARGV[22]   ms before now they count from (the governor's margin: see send-governor.ts)
  Output: the calls moved
]]
--- @include "../../bus/lua/includes/clock"

local now = clockOf(ARGV[1]) - tonumber(ARGV[22] or "0")
local token = ARGV[2]
local cost = tonumber(ARGV[3])

local moved = 0
for i = 1, 6 do
  local limit = tonumber(ARGV[4 + 3 * (i - 1)])
  if limit > 0 then
    local window = tonumber(ARGV[5 + 3 * (i - 1)])
    for n = 1, math.min(cost, limit) do
      local member = token .. ":" .. n
      local score = redis.call("ZSCORE", KEYS[i], member)
      -- Gone: it aged out of the window (a take removed it) before the answer came; it counts again.
      if not score or tonumber(score) < now then
        redis.call("ZADD", KEYS[i], now, member)
        moved = moved + 1
      end
    end
    if moved > 0 then
      local ttl = redis.call("PTTL", KEYS[i])
      if ttl < window + 1000 then redis.call("PEXPIRE", KEYS[i], window + 1000) end
    end
  end
end
return moved
