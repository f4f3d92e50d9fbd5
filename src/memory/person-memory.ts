/**
 * Person memory: what a person told the bot about themselves (their diet, their name, their time
 * zone) follows them into every chat with the bot, private and group, and is shown only in turns
 * where they speak, so one member's facts never reach another.
 *
 * A person is an account (`discord:123`, the speaker id a group label shows), or the name the
 * config links several accounts under (`memory.identities: { alice: ["telegram:1", "discord:2"] }`).
 * Their memory is a MemoryStore of scope `person` (files or Redis, like the chat memory) keyed by
 * that: a linked name has no `:`, an account always has one, so the two never meet.
 */
import type { MemoryStore } from "./memory.js";

export interface PersonMemory {
  /** The store, of scope `person`, keyed by {@link PersonMemory.keyOf}. */
  readonly store: MemoryStore;
  /** The memory key of a speaker id (`channel:senderId`): the linked name when config links it, else the id. */
  keyOf(speakerId: string): string;
}

/** Accounts linked under a name, as `memory.identities` lists them. */
export type Identities = Readonly<Record<string, readonly string[]>>;

export function createPersonMemory(store: MemoryStore, identities: Identities = {}): PersonMemory {
  if (store.scope !== "person") throw new Error(`person memory needs a store of scope "person", not "${store.scope}"`);
  const linked = new Map<string, string>();
  for (const [name, ids] of Object.entries(identities)) for (const id of ids) linked.set(id, name);
  return { store, keyOf: (speakerId) => linked.get(speakerId) ?? speakerId };
}
