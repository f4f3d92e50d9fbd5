--[[
  Included (`--- @include`) by the store's history writes (append, compact, reset): the write runs
  once, and only while the caller holds the session's lease.

  fencedWriteRefused(writeKey, ownKey, leaseKey, sid, token, now)
  writeKey  write:<write id>  marker of this very write (1 hour): a replay after its reply finds it
  ownKey    own               HASH sid -> token of the current lease (the bus's)
  leaseKey  lease             ZSET sid -> lease expiry in ms (the bus's)
  token     the fencing token, or "" for an unfenced write
  Output: nil to go on (the marker is set); 0 when the write was replayed (it happened already);
          the error LEASE_LOST when the lease is not held (nothing was written)
]]
--- @include "../../../bus/lua/includes/lease-held"

local function fencedWriteRefused(writeKey, ownKey, leaseKey, sid, token, now)
  -- The same write replayed: it happened already (the caller never learns its first reply).
  if redis.call("EXISTS", writeKey) == 1 then
    return 0
  end
  if token ~= "" then
    local lost = leaseLost(ownKey, leaseKey, sid, token, now)
    if lost then
      return redis.error_reply("LEASE_LOST " .. lost)
    end
  end
  redis.call("SET", writeKey, "1", "PX", 3600000)
  return nil
end
