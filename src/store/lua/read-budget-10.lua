--[[
  Reads up to five budgets as they stand now, releasing expired reservations first (so a crashed
  worker's hold is gone from what /usage shows as soon as it expired).

  KEYS[2i-1] budget:<unit>:<scope>       HASH of budget i (i = 1..5), see includes/budget-state
  KEYS[2i]   budget:<unit>:<scope>:held  ZSET of budget i
  ARGV[1] now (ms)
  ARGV[1 + i] window start of budget i (ms), "" for an unused slot
  Output: { used, held, oldest, ... } three per slot (oldest -1 when none)
]]
--- @include "includes/budget-state"

local now = tonumber(ARGV[1])
local reply = {}
for slot = 1, budgetSlots do
  local from = ARGV[1 + slot]
  if from ~= "" then
    local used, held, oldest = budgetState(KEYS[2 * slot - 1], KEYS[2 * slot], now, tonumber(from))
    for _, value in ipairs({ used, held, oldest or -1 }) do table.insert(reply, value) end
  else
    for _, value in ipairs({ 0, 0, -1 }) do table.insert(reply, value) end
  end
end
return reply
