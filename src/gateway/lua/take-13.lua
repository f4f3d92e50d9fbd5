--[[
  Takes `cost` calls from up to six send budgets of one bot account at once, or from none: the
  shared send governor of every gateway of the bot (src/gateway/redis-quota-store.ts). Each budget
  is a sliding-window log, a ZSET of call times; a call counts while its time is within the window.

  KEYS[1..6] quota:<channel>:<account>:<scope key>, all under the account's hash tag; a slot not
             used repeats KEYS[1] with limit 0
  ARGV[1]    now (ms), or "" for Redis's clock (every gateway judges by one clock)
  ARGV[2]    token of this take (unique): members are <token>:<n>
  ARGV[3]    cost: calls taken from each budget
  ARGV[4]    "wait" (finals: up to the limit, but for the calls a quiet chat leaves to busy ones)
             or "try" (drafts, typing: down to the reserve)
  ARGV[5+3(i-1)..7+3(i-1)]  limit, window (ms), reserve of KEYS[i]
  KEYS[7..12] <KEYS[i]>:streams  ZSET reply id -> last seen: the replies streaming into budget i
  ARGV[24]   a draft's try: the reply it streams ("" none)
  ARGV[25]   ms after which a reply not seen no longer counts as streaming
  ARGV[26..31] budget i's reserve while more than one reply streams into it ("" not counted; -1 as
             many calls as replies stream, up to the limit)
  ARGV[23]   ms ahead of now the calls are counted from (the taker's event loop is behind: it
             sends them that much later), so every gateway counts them as long as the platform will
  KEYS[13]   <account tag>:busy  ZSET chat -> when it may be back for the account's budgets: the
             busy chats (more replies queued behind the call they asked for), every gateway's
  ARGV[32]   a final's chat ("" none)
  ARGV[33]   "busy" (listed now), "last" (its last call: unlisted) or "quiet" (leaves a call of
             each account budget to every listed chat that may be back by now)
  ARGV[34]   ms after which a listed chat no longer counts
  ARGV[35]   "1" for each of the six budgets that is the whole account's, else "0"
             A final refused only for the calls kept for busy chats is told to ask again in 50 ms.
  Output: {1} taken; {0, wait ms, i} refused: KEYS[i] stands in the way longest, for wait ms
]]
--- @include "../../bus/lua/includes/clock"

local now = clockOf(ARGV[1])
local token = ARGV[2]
local cost = tonumber(ARGV[3])
local trying = ARGV[4] == "try"
local stamp = now + tonumber(ARGV[23] or "0")
local replyId = ARGV[24] or ""
local idle = tonumber(ARGV[25] or "0")
local chat = ARGV[32] or ""
local chatState = ARGV[33] or ""
local accounts = ARGV[35] or ""

-- A final's chat in the account's list of busy chats; what a quiet one leaves to them.
local held = 0
local HOLD_RETRY_MS = 50
if not trying and chat ~= "" then
  local busyIdle = tonumber(ARGV[34])
  redis.call("ZREMRANGEBYSCORE", KEYS[13], "-inf", now - busyIdle)
  if chatState == "busy" then
    local readyAt = tonumber(redis.call("ZSCORE", KEYS[13], chat) or now)
    redis.call("ZADD", KEYS[13], math.max(readyAt, now), chat)
    redis.call("PEXPIRE", KEYS[13], busyIdle * 2 + 1000)
  elseif chatState == "last" then
    redis.call("ZREM", KEYS[13], chat)
  else
    held = redis.call("ZCOUNT", KEYS[13], "-inf", now)
    local own = redis.call("ZSCORE", KEYS[13], chat)
    if own and tonumber(own) <= now then held = held - 1 end
  end
end

local blockedBy = 0
local longest = 0
local used = {}
for i = 1, 6 do
  local limit = tonumber(ARGV[5 + 3 * (i - 1)])
  if limit > 0 then
    local window = tonumber(ARGV[6 + 3 * (i - 1)])
    local reserve = tonumber(ARGV[7 + 3 * (i - 1)])
    redis.call("ZREMRANGEBYSCORE", KEYS[i], "-inf", now - window)
    local count = redis.call("ZCARD", KEYS[i])
    if trying and replyId ~= "" and (ARGV[25 + i] or "") ~= "" then
      -- Counted in the replies streaming into the budget, every gateway's: several keep it whole.
      local streams = KEYS[6 + i]
      redis.call("ZREMRANGEBYSCORE", streams, "-inf", now - idle)
      redis.call("ZADD", streams, now, replyId)
      redis.call("PEXPIRE", streams, idle + 1000)
      local streaming = redis.call("ZCARD", streams)
      local shared = tonumber(ARGV[25 + i])
      if shared < 0 then
        reserve = math.max(reserve, math.min(limit, streaming))
      elseif streaming > 1 then
        reserve = math.max(reserve, shared)
      end
    end
    local allowed = limit
    if trying then
      allowed = limit - reserve
    elseif held > 0 and string.sub(accounts, i, i) == "1" then
      allowed = limit - math.min(held, limit - 1)
    end
    -- A call that makes more platform calls than the budget allows at all takes the whole budget.
    local excess = count + math.min(cost, limit) - allowed
    if excess > 0 then
      local wait = window
      if excess <= count then
        -- Room comes once the excess-th oldest call has aged out of the window.
        local oldest = redis.call("ZRANGE", KEYS[i], excess - 1, excess - 1, "WITHSCORES")
        wait = math.max(1, tonumber(oldest[2]) + window - now)
      end
      -- Only the calls kept for busy chats stand in the way: they may be given back (a busy chat
      -- held back by its own budget) long before the oldest call ages out; ask again soon.
      if not trying and count + math.min(cost, limit) <= limit then wait = math.min(wait, HOLD_RETRY_MS) end
      if wait > longest then
        longest = wait
        blockedBy = i
      end
    end
    used[#used + 1] = { KEYS[i], window, math.min(cost, limit) }
  end
end
if blockedBy > 0 then
  -- Held back by its own chat's budget: a busy chat needs nothing of the account's until then.
  if chatState == "busy" and string.sub(accounts, blockedBy, blockedBy) ~= "1" then
    redis.call("ZADD", KEYS[13], "XX", now + longest, chat)
  end
  return { 0, longest, blockedBy }
end
for _, slot in ipairs(used) do
  if slot[3] < 1 then break end
  for n = 1, slot[3] do
    redis.call("ZADD", slot[1], stamp, token .. ":" .. n)
  end
  -- Kept until its newest call (a closed budget's filler may lie ahead) has aged out.
  local newest = redis.call("ZRANGE", slot[1], -1, -1, "WITHSCORES")
  redis.call("PEXPIRE", slot[1], math.max(tonumber(newest[2]), now) + slot[2] - now + 1000)
end
return { 1 }
