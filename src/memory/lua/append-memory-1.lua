--[[
  Appends a dated section to a memory in one step, so two workers appending at once both land
  (a read-modify-write from the client would lose one). The separator rules are the file store's
  (withSection in ../memory.ts): an empty memory becomes the section, otherwise one blank line.

  KEYS[1] memory:...:current   STRING the memory's Markdown
  ARGV[1] the section, "## <date>\n\n<text>\n"
  ARGV[2] largest memory in bytes
  Output: {1, bytes} when appended; {0, bytes} when the result would be over the cap (nothing written)
]]
local current = redis.call("GET", KEYS[1]) or ""
local result
if current:match("^%s*$") then
  result = ARGV[1]
elseif current:sub(-1) == "\n" then
  result = current .. "\n" .. ARGV[1]
else
  result = current .. "\n\n" .. ARGV[1]
end
if #result > tonumber(ARGV[2]) then
  return {0, #result}
end
redis.call("SET", KEYS[1], result)
return {1, #result}
