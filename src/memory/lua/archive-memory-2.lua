--[[
  Moves a memory aside and starts it again with a pointer to where it went, in one step (an append
  in between would otherwise land in the archive or be overwritten).

  KEYS[1] memory:...:current         STRING the memory's Markdown
  KEYS[2] memory:...:archive:<ms>    STRING where the old text goes
  ARGV[1] the pointer text the memory starts again with
  Output: 1 when there was something to move, 0 otherwise (the pointer is written either way)
]]
local current = redis.call("GET", KEYS[1])
local moved = 0
if current then
  redis.call("SET", KEYS[2], current)
  moved = 1
end
redis.call("SET", KEYS[1], ARGV[1])
return moved
