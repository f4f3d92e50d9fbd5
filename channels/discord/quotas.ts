/**
 * Discord's send limits: 5 messages per 5 s in a channel (a thread is a channel of its own),
 * message edits counted with them, and 50 requests a second for a bot. Discord answers 429 with
 * its bucket headers, X-RateLimit-Scope saying whether the bot's global budget (`bot`) or the
 * channel's (`channel`) was hit; 10,000 invalid requests (429, 401, 403) in 10 minutes get the
 * bot's IP banned for a while.
 *
 * The bot budget the governor keeps is 45 of the 50: discord.js makes calls of its own that no
 * governor sees (the gateway URL on every connect and reconnect, command registration), and the
 * quota bench showed two of them, made while a burst of replies filled the second, draw 429s.
 */
import { defineQuotas } from "../../src/gateway/kit/index.js";

export const discordQuotas = defineQuotas({
  scopes: {
    channel: { per: "chat", limit: 5, windowMs: 5_000, calls: ["send", "edit"], note: "Discord: 5 messages per 5 s per channel." },
    bot: { per: "account", limit: 45, windowMs: 1_000, note: "Discord: 50 requests per second per bot; 5 are left for the calls discord.js makes by itself (connecting)." },
  },
});
