/**
 * The Discord bot budget the governor keeps, beside Discord's published one: discord.js makes calls
 * of its own the governor never sees (GET /gateway/bot on each connect and reconnect), and the
 * quota bench drew 429s when two of them fell into a second a burst of replies filled.
 */
import { describe, expect, it } from "vitest";
import { discordQuotas } from "../../../channels/discord/quotas.js";
import { DISCORD_PUBLISHED_LIMITS } from "../../support/fake-discord-model.js";

describe("Discord's bot budget", () => {
  it("leaves room under the published 50 a second for the calls discord.js makes by itself", () => {
    const bot = discordQuotas.scopes.bot!;
    expect(bot.windowMs).toBe(DISCORD_PUBLISHED_LIMITS.bot.windowMs);
    // Both gateways of a hand-over connect at once: two GET /gateway/bot in one second, at least.
    expect(DISCORD_PUBLISHED_LIMITS.bot.limit - bot.limit).toBeGreaterThanOrEqual(2);
  });
});
