--[[
  Included (`--- @include`) by every script that judges time (lease expiry, due times).

  clockOf(arg)
  arg    the time the caller passed (ms), or "" to take Redis's own clock (TIME)
  Output: the time in ms

  Production callers pass "": a command that reaches Redis late (queued offline while the
  connection was down, or replayed after a lost reply) then judges leases by the time it arrives,
  not by a stale client clock. Tests pass their hand-moved clock.
]]
local function clockOf(arg)
  if arg == nil or arg == "" then
    local time = redis.call("TIME")
    return tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
  end
  return tonumber(arg)
end
