--[[
  Settles a model call: releases its reservation where it is still held and adds what the call
  really used to each budget's current bucket. What was used is added even when the reservation
  had expired meanwhile: those tokens were spent. (The usage report's day is not written here: the
  process sums its calls' counts and adds them every 5 seconds, add-usage-1.lua.)

  KEYS[2i-1] budget:<unit>:<scope>       HASH of budget i (i = 1..5), see includes/budget-state
  KEYS[2i]   budget:<unit>:<scope>:held  ZSET of budget i
  ARGV[1] now (ms)
  ARGV[2] reservation id
  ARGV[3 + 5(i-1) .. 7 + 5(i-1)] budget i: window start ("" unused), bucket (ms), reserved amount, used amount, keep (ms)
  Output: { used, held, oldest, ... } three per slot, after the settlement (oldest -1 when none)
]]
--- @include "includes/budget-state"

local now = tonumber(ARGV[1])
local id = ARGV[2]
local reply = {}
for slot = 1, budgetSlots do
  local base = 3 + 5 * (slot - 1)
  if ARGV[base] ~= "" then
    local hash, held = KEYS[2 * slot - 1], KEYS[2 * slot]
    local reserved = ARGV[base + 2]
    if redis.call("ZREM", held, id .. ":" .. reserved) == 1 then
      redis.call("HINCRBY", hash, "held", -tonumber(reserved))
    end
    local amount = tonumber(ARGV[base + 3])
    if amount > 0 then redis.call("HINCRBY", hash, ARGV[base + 1], ARGV[base + 3]) end
    keepBudget(hash, held, tonumber(ARGV[base + 4]))
    local used, total, oldest = budgetState(hash, held, now, tonumber(ARGV[base]))
    for _, value in ipairs({ used, total, oldest or -1 }) do table.insert(reply, value) end
  else
    for _, value in ipairs({ 0, 0, -1 }) do table.insert(reply, value) end
  end
end
return reply
