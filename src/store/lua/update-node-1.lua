--[[
  Compare-and-set on one node of a workflow run: applies the node's fields only when the node's
  status and the run's status are allowed ones and, when a cap is given, fewer than that many other
  nodes of the run are queued or running (two workers starting nodes of one run at once cannot
  both take its last slot).

  KEYS[1] wfrun:<id>   HASH field -> value as JSON text; `nodeIds` is the JSON list of node ids,
                       `node:<nodeId>:<field>` a node's field
  ARGV[1] nodeId
  ARGV[2] statuses the node must be in, comma-separated, or "*" for any
  ARGV[3] statuses the run must be in, comma-separated, or "*" for any
  ARGV[4] the cap on other queued or running nodes, or "" for none
  ARGV[5..] node field, JSON value, node field, JSON value, ... (may be empty)
  Output: 1 updated; 0 the run or node does not exist or a condition does not hold (nothing written)
]]
local nodeId, allowedNode, allowedRun, cap = ARGV[1], ARGV[2], ARGV[3], ARGV[4]

local function unquote(text)
  return text and string.match(text, '^"(.*)"$')
end
local function allows(list, status)
  return list == "*" or string.find("," .. list .. ",", "," .. status .. ",", 1, true) ~= nil
end

local runStatus = unquote(redis.call("HGET", KEYS[1], "status"))
if not runStatus or not allows(allowedRun, runStatus) then return 0 end
local nodeStatus = unquote(redis.call("HGET", KEYS[1], "node:" .. nodeId .. ":status"))
if not nodeStatus or not allows(allowedNode, nodeStatus) then return 0 end

if cap ~= "" then
  local active = 0
  for _, other in ipairs(cjson.decode(redis.call("HGET", KEYS[1], "nodeIds"))) do
    if other ~= nodeId then
      local status = unquote(redis.call("HGET", KEYS[1], "node:" .. other .. ":status"))
      if status == "queued" or status == "running" then active = active + 1 end
    end
  end
  if active >= tonumber(cap) then return 0 end
end

for index = 5, #ARGV, 2 do
  redis.call("HSET", KEYS[1], "node:" .. nodeId .. ":" .. ARGV[index], ARGV[index + 1])
end
return 1
