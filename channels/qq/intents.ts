/** The gateway intents (bit flags) of the QQ Bot API, by the names the config uses. */
export const INTENT_BITS = {
  guilds: 1 << 0,
  guildMessages: 1 << 9,
  directMessage: 1 << 12,
  groupAndC2C: 1 << 25,
  publicGuildMessages: 1 << 30,
} as const;

export type IntentName = keyof typeof INTENT_BITS;

export function intentsOf(names: readonly IntentName[]): number {
  return names.reduce((bits, name) => (bits | INTENT_BITS[name]) >>> 0, 0);
}
