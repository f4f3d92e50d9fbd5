/**
 * A set whose members expire after a fixed time, oldest first, and which never holds more than
 * `maxSize` (beyond it the oldest member goes early). Backs the in-memory dedupe of platform event
 * ids and delivered outbound ids, which must remember a day of traffic.
 *
 * A day of traffic is a lot of members, so a member is kept as a 128-bit fingerprint (HMAC-SHA-256
 * under a key of this set's own, cut to 16 bytes) in typed arrays: about 40 bytes each, in a few
 * large buffers the garbage collector does not walk, against about 200 bytes for a string in a Map
 * (plus the strings it keeps alive). Two members share a fingerprint with probability 2^-128 per
 * pair, and, the key being secret and random, nobody can make them: a duplicate is never missed,
 * a new member is never taken for an old one.
 *
 * Layout: a ring of slots in insertion order (which is expiry order, the TTL being constant), each
 * slot a fingerprint and an expiry time; and an open-addressing hash table (linear probing, load at
 * most 1/2) from fingerprint to slot. The ring starts small and doubles up to `maxSize`.
 */
import { createHmac, randomBytes } from "node:crypto";

const WORDS = 4; // 4 × 32 bits = the 128-bit fingerprint
const EMPTY = 0; // table entries hold slot + 1
const INITIAL_CAPACITY = 1_024;

export class ExpiringSet {
  private readonly key = randomBytes(32);
  private capacity = 0;
  /** Ring slot → fingerprint words. */
  private fingerprints = new Uint32Array(0);
  /** Ring slot → expiry time (ms). */
  private expiries = new Float64Array(0);
  /** Hash table: slot + 1, or EMPTY. */
  private table = new Int32Array(0);
  private mask = 0;
  /** Ring slot of the oldest member, and how many there are. */
  private head = 0;
  private count = 0;
  /** The fingerprint being looked up, and the one of the member being dropped. */
  private readonly probe = new Uint32Array(WORDS);
  private readonly dropping = new Uint32Array(WORDS);

  constructor(
    private readonly ttlMs: number,
    private readonly now: () => number,
    private readonly maxSize = 200_000,
  ) {
    if (!(maxSize >= 1)) throw new RangeError(`an expiring set holds at least 1 member, not ${maxSize}`);
    this.resize(Math.min(INITIAL_CAPACITY, maxSize));
  }

  /** Members held, expired ones not swept yet included (at most `maxSize`). */
  get size(): number {
    return this.count;
  }

  /** Adds `member`; false when it was already present and unexpired (SET NX semantics). */
  add(member: string): boolean {
    const now = this.now();
    this.sweep(now);
    this.fingerprint(member);
    const position = this.find(this.probe);
    if (position >= 0) {
      const slot = this.table[position]! - 1;
      if (this.expiries[slot]! > now) return false;
      // Only a clock that went back leaves an expired member behind unexpired ones: renew it in place.
      this.expiries[slot] = now + this.ttlMs;
      return true;
    }
    if (this.count === this.capacity) {
      if (this.capacity < this.maxSize) this.resize(Math.min(this.capacity * 2, this.maxSize));
      else this.dropOldest();
    }
    const slot = (this.head + this.count) % this.capacity;
    this.fingerprints.set(this.probe, slot * WORDS);
    this.expiries[slot] = now + this.ttlMs;
    this.count += 1;
    this.place(slot);
    return true;
  }

  has(member: string): boolean {
    this.fingerprint(member);
    const position = this.find(this.probe);
    return position >= 0 && this.expiries[this.table[position]! - 1]! > this.now();
  }

  private sweep(now: number): void {
    while (this.count > 0 && this.expiries[this.head]! <= now) this.dropOldest();
  }

  /** The member's fingerprint, into `probe`. */
  private fingerprint(member: string): void {
    const digest = createHmac("sha256", this.key).update(member).digest();
    for (let word = 0; word < WORDS; word++) this.probe[word] = digest.readUInt32LE(word * 4);
  }

  /** Where the fingerprint `words` is in the table, or -1. */
  private find(words: Uint32Array): number {
    for (let position = words[0]! & this.mask; ; position = (position + 1) & this.mask) {
      const entry = this.table[position]!;
      if (entry === EMPTY) return -1;
      if (this.matches(entry - 1, words)) return position;
    }
  }

  private matches(slot: number, words: Uint32Array): boolean {
    const base = slot * WORDS;
    for (let word = 0; word < WORDS; word++) if (this.fingerprints[base + word] !== words[word]) return false;
    return true;
  }

  /** Enters ring slot `slot` in the table, at the first free place from its home. */
  private place(slot: number): void {
    let position = this.fingerprints[slot * WORDS]! & this.mask;
    while (this.table[position] !== EMPTY) position = (position + 1) & this.mask;
    this.table[position] = slot + 1;
  }

  private dropOldest(): void {
    const slot = this.head;
    this.dropping.set(this.fingerprints.subarray(slot * WORDS, slot * WORDS + WORDS));
    const position = this.find(this.dropping);
    if (position >= 0) this.removeAt(position);
    this.head = (this.head + 1) % this.capacity;
    this.count -= 1;
  }

  /**
   * Empties a table place and shifts back the entries after it that probed past it, so every
   * entry stays reachable from its home without tombstones.
   */
  private removeAt(position: number): void {
    let hole = position;
    for (let next = (hole + 1) & this.mask; this.table[next] !== EMPTY; next = (next + 1) & this.mask) {
      const home = this.fingerprints[(this.table[next]! - 1) * WORDS]! & this.mask;
      // The entry at `next` may fill the hole unless its home lies cyclically in (hole, next].
      const homeAfterHole = (home - hole - 1 + this.mask + 1) & this.mask;
      const nextAfterHole = (next - hole - 1 + this.mask + 1) & this.mask;
      if (homeAfterHole <= nextAfterHole) continue;
      this.table[hole] = this.table[next]!;
      hole = next;
    }
    this.table[hole] = EMPTY;
  }

  /** A ring of `capacity` slots, the members kept in order from slot 0, and a table for it. */
  private resize(capacity: number): void {
    const fingerprints = new Uint32Array(capacity * WORDS);
    const expiries = new Float64Array(capacity);
    for (let index = 0; index < this.count; index++) {
      const slot = (this.head + index) % this.capacity;
      fingerprints.set(this.fingerprints.subarray(slot * WORDS, slot * WORDS + WORDS), index * WORDS);
      expiries[index] = this.expiries[slot]!;
    }
    let tableSize = 1;
    while (tableSize < capacity * 2) tableSize *= 2;
    this.capacity = capacity;
    this.fingerprints = fingerprints;
    this.expiries = expiries;
    this.table = new Int32Array(tableSize);
    this.mask = tableSize - 1;
    this.head = 0;
    for (let slot = 0; slot < this.count; slot++) this.place(slot);
  }
}
