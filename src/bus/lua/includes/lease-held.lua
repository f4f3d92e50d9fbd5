--[[
  Included (`--- @include`) by every script that acts only while a session's lease is held. A
  lease is `own[sid] = "<token>:<worker id>"`, and it holds while that worker is alive: its entry
  in `workers` (worker id -> liveness expiry, renewed in one batch per worker) is later than now.
  Expiry <= now counts as expired, the bound the reaper uses, so a lease is never both reapable
  and held.

  leaseLost(ownKey, workersKey, sid, token, now)
  ownKey      own      HASH sid -> "<token>:<worker id>" of the current lease
  workersKey  workers  ZSET worker id -> liveness expiry (ms)
  Output: nil while held, else why not (scripts reply with the error "LEASE_LOST <why>")

  leaseLostIn(alive, ownKey, workersKey, sid, token, now): the same for a script checking the leases
  of many sessions in one call (a batch of acks or appends); `alive` (worker id -> true/false,
  empty at first) keeps each worker's liveness, so it is read once per worker per call.
]]
local function leaseLost(ownKey, workersKey, sid, token, now)
  local held = redis.call("HGET", ownKey, sid)
  local separator = held and string.find(held, ":", 1, true)
  if (not separator) or string.sub(held, 1, separator - 1) ~= token then
    return "the session's lease is held by another token"
  end
  local expiry = redis.call("ZSCORE", workersKey, string.sub(held, separator + 1))
  if (not expiry) or tonumber(expiry) <= tonumber(now) then
    return "the session's lease expired (its worker stopped renewing)"
  end
  return nil
end

local function leaseLostIn(alive, ownKey, workersKey, sid, token, now)
  local held = redis.call("HGET", ownKey, sid)
  local separator = held and string.find(held, ":", 1, true)
  if (not separator) or string.sub(held, 1, separator - 1) ~= token then
    return "the session's lease is held by another token"
  end
  local worker = string.sub(held, separator + 1)
  if alive[worker] == nil then
    local expiry = redis.call("ZSCORE", workersKey, worker)
    alive[worker] = (expiry and tonumber(expiry) > tonumber(now)) and true or false
  end
  if not alive[worker] then
    return "the session's lease expired (its worker stopped renewing)"
  end
  return nil
end
