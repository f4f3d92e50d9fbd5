--[[
  Included (`--- @include`) by the scripts that make a session ready: one wake-up token for a
  blocked claimer. The list is trimmed only once it outgrows 64 tokens (nobody was waiting), so
  the common case is one command.

  wakeOne(wake)
  wake  LIST of wake-up tokens
]]
local function wakeOne(wake)
  if redis.call("LPUSH", wake, "1") > 64 then
    redis.call("LTRIM", wake, 0, 63)
  end
end
