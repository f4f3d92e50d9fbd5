--[[
  Included (`--- @include`) by every script that acts only while a session's lease is held: the
  token is the session's current one and the lease has not expired. Expiry <= now counts as
  expired, the bound claim-6's reaper uses, so a lease is never both reapable and held.

  leaseLost(ownKey, leaseKey, sid, token, now)
  ownKey    own     HASH sid -> token of the current lease
  leaseKey  lease   ZSET sid -> lease expiry (ms)
  Output: nil while held, else why not (scripts reply with the error "LEASE_LOST <why>")
]]
local function leaseLost(ownKey, leaseKey, sid, token, now)
  if redis.call("HGET", ownKey, sid) ~= token then
    return "the session's lease is held by another token"
  end
  local expiry = redis.call("ZSCORE", leaseKey, sid)
  if (not expiry) or tonumber(expiry) <= tonumber(now) then
    return "the session's lease expired"
  end
  return nil
end
