--[[
  Included (`--- @include`) by the store's history rewrites (compact, reset; the batched append has its own): the write runs
  once, and only while the caller holds the session's lease.

  fencedWriteRefused(writeKey, ownKey, leaseKey, sid, token, now)
  writeKey  write:<write id>  marker of this very write (1 hour): a replay after its reply finds it
  ownKey    own               HASH sid -> "<token>:<worker id>" of the current lease (the bus's)
  leaseKey  workers           ZSET worker id -> liveness expiry in ms (the bus's)
  token     the fencing token, or "" for an unfenced write
  Output: nil to go on (the marker is set); 0 when the write was replayed (it happened already);
          the error LEASE_LOST when the lease is not held (nothing was written)
]]
--- @include "../../../bus/lua/includes/lease-held"

local function fencedWriteRefused(writeKey, ownKey, leaseKey, sid, token, now)
  if token ~= "" then
    local lost = leaseLost(ownKey, leaseKey, sid, token, now)
    if lost then
      -- The same write replayed after the lease ended: it happened already (its first reply was lost).
      if redis.call("EXISTS", writeKey) == 1 then
        return 0
      end
      return redis.error_reply("LEASE_LOST " .. lost)
    end
  end
  -- Set only by the first run of this write: a replay finds it and does nothing twice.
  if not redis.call("SET", writeKey, "1", "NX", "PX", 3600000) then
    return 0
  end
  return nil
end
