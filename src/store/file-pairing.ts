/**
 * DM pairing in the file store: one JSON file, `<dataDir>/pairing.json`:
 * `{"version":1,"pending":[PairingRequest...],"approved":[ApprovedPairing...]}`.
 *
 * Unlike sessions, this file has two writers: the running bot (new requests) and
 * `countbot pairing approve` in another process. So every operation reads the file afresh (a read is
 * skipped only when a stat shows the very same file as last time), writes go through one queue in
 * the process and, across processes, a lock file (`pairing.json.lock`, created exclusively, taken
 * over when older than `staleLockMs`), and the file is replaced atomically (temp file + rename).
 * Expired requests are dropped whenever the file is written anyway.
 */
import { randomBytes } from "node:crypto";
import { mkdir, open, readFile, rm, stat } from "node:fs/promises";
import path from "node:path";
import { z } from "zod";
import { sleep } from "../sleep.js";
import { createKeyedQueue, writeFileAtomic } from "./file-io.js";
import type { ApprovedPairing, PairingRequest, PairingSender, PairingStore } from "./store.js";

/** 32 letters and digits without look-alikes (no 0/O, 1/I); 32 divides 256, so bytes map unbiased. */
export const PAIRING_CODE_ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789";
export const PAIRING_CODE_LENGTH = 8;

/** A crypto-random code of PAIRING_CODE_LENGTH characters (40 bits). */
export function generatePairingCode(): string {
  return [...randomBytes(PAIRING_CODE_LENGTH)].map((byte) => PAIRING_CODE_ALPHABET[byte % PAIRING_CODE_ALPHABET.length]).join("");
}

/** What an operator types, as stored: `abcd-efgh` and ` ABCD EFGH ` are `ABCDEFGH`. */
export function normalizePairingCode(input: string): string {
  return input.replace(/[\s-]+/g, "").toUpperCase();
}

const SenderShape = {
  // The bus's rule for channel names; it also keeps `<channel>:<senderId>` unambiguous.
  channel: z.string().regex(/^[\w-]+(\.[\w-]+)?$/, "letters, digits, _ and - (an account after a dot: telegram.support)"),
  senderId: z.string().min(1),
  senderName: z.string().optional(),
  chatId: z.string().min(1),
};
export const PairingSenderSchema = z.object(SenderShape);
export const PairingRequestSchema = z.object({ ...SenderShape, code: z.string().min(1), requestedAt: z.number(), expiresAt: z.number() });
export const ApprovedPairingSchema = z.object({ ...SenderShape, code: z.string().min(1), requestedAt: z.number(), approvedAt: z.number() });

/** The sender fields of `sender`, checked: a request the store could not read back fails here. */
export function pairingSender(sender: PairingSender): PairingSender {
  const parsed = PairingSenderSchema.safeParse(sender);
  if (!parsed.success) throw new Error(`invalid pairing sender: ${z.prettifyError(parsed.error)}`);
  const { channel, senderId, senderName, chatId } = parsed.data;
  return senderName === undefined ? { channel, senderId, chatId } : { channel, senderId, senderName, chatId };
}

const FORMAT_VERSION = 1;
const PairingFileSchema = z.object({
  version: z.literal(FORMAT_VERSION),
  pending: z.array(PairingRequestSchema),
  approved: z.array(ApprovedPairingSchema),
});
type PairingState = z.infer<typeof PairingFileSchema>;

export interface FilePairingStoreOptions {
  /** The JSON file, `<dataDir>/pairing.json`. */
  file: string;
  /** Code generator; injected so tests can force collisions. Default: generatePairingCode. */
  newCode?: () => string;
  /** A lock file older than this is taken to be left by a crashed process. Default 10 s. */
  staleLockMs?: number;
  /** Give up waiting for another process's lock after this long. Default 5 s. */
  lockTimeoutMs?: number;
}

export interface FilePairingStore extends PairingStore {
  /** Refuses new work and waits for queued writes. */
  close(): Promise<void>;
}

const sameSender = (channel: string, senderId: string) => (entry: PairingSender) => entry.channel === channel && entry.senderId === senderId;

function isErrno(error: unknown, code: string): boolean {
  return (error as NodeJS.ErrnoException | undefined)?.code === code;
}

/**
 * The pairing file: read through a cache keyed by the file's identity (inode, size, times), and
 * changed read-modify-write under two locks, this process's queue and a lock file other processes
 * respect (a lock older than `staleLockMs` is taken to be a crashed process's).
 */
class PairingFile {
  private readonly lockFile: string;
  private readonly queue = createKeyedQueue();
  private cache: { identity: string; state: PairingState } | undefined;
  closed = false;

  constructor(
    private readonly file: string,
    private readonly staleLockMs: number,
    private readonly lockTimeoutMs: number,
  ) {
    this.lockFile = `${file}.lock`;
  }

  /** The state as it is now (a copy); refused once closed. */
  read(): Promise<PairingState> {
    if (this.closed) return Promise.reject(new Error("the file store is closed"));
    return this.readState();
  }

  /** Read, change and write back under both locks; `change` returns false to skip the write. */
  update<T>(change: (state: PairingState) => { result: T; changed: boolean }): Promise<T> {
    if (this.closed) return Promise.reject(new Error("the file store is closed"));
    return this.queue.run("pairing", async () => {
      await mkdir(path.dirname(this.file), { recursive: true });
      await this.acquireLock();
      try {
        const state = await this.readState();
        const { result, changed } = change(state);
        if (changed) {
          await writeFileAtomic(this.file, `${JSON.stringify(state, null, 2)}\n`);
          this.cache = undefined;
        }
        return result;
      } finally {
        await rm(this.lockFile, { force: true });
      }
    });
  }

  drain(): Promise<void> {
    return this.queue.drain();
  }

  private async readState(): Promise<PairingState> {
    const { file } = this;
    let identity: string;
    try {
      const info = await stat(file, { bigint: true });
      identity = `${info.ino}:${info.size}:${info.mtimeNs}:${info.ctimeNs}`;
    } catch (error) {
      if (isErrno(error, "ENOENT")) return { version: FORMAT_VERSION, pending: [], approved: [] };
      throw error;
    }
    if (this.cache?.identity === identity) return structuredClone(this.cache.state);
    const text = await readFile(file, "utf8");
    let parsed: ReturnType<typeof PairingFileSchema.safeParse>;
    try {
      parsed = PairingFileSchema.safeParse(JSON.parse(text));
    } catch (error) {
      throw new Error(`${file} is not valid JSON; fix or remove it (approvals are kept there)`, { cause: error });
    }
    // Never start over silently: that would forget every approval.
    if (!parsed.success) throw new Error(`${file} is not a pairing file: ${z.prettifyError(parsed.error)}`);
    this.cache = { identity, state: parsed.data };
    return structuredClone(parsed.data);
  }

  private async acquireLock(): Promise<void> {
    const { lockFile } = this;
    const deadline = Date.now() + this.lockTimeoutMs;
    for (;;) {
      try {
        const handle = await open(lockFile, "wx");
        await handle.writeFile(`${process.pid}\n`);
        await handle.close();
        return;
      } catch (error) {
        if (!isErrno(error, "EEXIST")) throw error;
      }
      const info = await stat(lockFile).catch(() => undefined);
      if (info && Date.now() - info.mtimeMs > this.staleLockMs) {
        await rm(lockFile, { force: true });
        continue;
      }
      if (Date.now() > deadline) {
        throw new Error(`${lockFile} is held by another process; remove it if no countbot process is running`);
      }
      await sleep(20);
    }
  }
}

/** Drops requests expired at `now`; true when any were. */
function pruneExpired(state: PairingState, now: number): boolean {
  const before = state.pending.length;
  state.pending = state.pending.filter((request) => request.expiresAt > now);
  return state.pending.length !== before;
}

/** The sender's pending request, or a new one with a code no other pending request has. */
function requestIn(state: PairingState, sender: PairingSender, newCode: () => string, ttlMs: number, now: number): { result: { request: PairingRequest; created: boolean }; changed: boolean } {
  const pruned = pruneExpired(state, now);
  const existing = state.pending.find(sameSender(sender.channel, sender.senderId));
  if (existing) return { result: { request: existing, created: false }, changed: pruned };
  const taken = new Set(state.pending.map((request) => request.code));
  let code = newCode();
  for (let attempt = 1; taken.has(code); attempt++) {
    if (attempt >= 100) throw new Error("could not find a free pairing code");
    code = newCode();
  }
  const request: PairingRequest = { ...sender, code, requestedAt: now, expiresAt: now + ttlMs };
  state.pending.push(request);
  return { result: { request, created: true }, changed: true };
}

/** Moves the pending request with `code` to the approved senders (replacing an earlier approval of the same sender). */
function approveIn(state: PairingState, code: string, now: number): { result: ApprovedPairing | undefined; changed: boolean } {
  const pruned = pruneExpired(state, now);
  const index = state.pending.findIndex((request) => request.code === code);
  if (index === -1) return { result: undefined, changed: pruned };
  const [request] = state.pending.splice(index, 1);
  const { expiresAt: _expiresAt, ...sender } = request!;
  const approved: ApprovedPairing = { ...sender, approvedAt: now };
  state.approved = state.approved.filter((entry) => !sameSender(approved.channel, approved.senderId)(entry));
  state.approved.push(approved);
  return { result: approved, changed: true };
}

export function createFilePairingStore(options: FilePairingStoreOptions): FilePairingStore {
  const newCode = options.newCode ?? generatePairingCode;
  const pairingFile = new PairingFile(options.file, options.staleLockMs ?? 10_000, options.lockTimeoutMs ?? 5_000);
  const read = () => pairingFile.read();

  return {
    async request(input, { ttlMs, now }) {
      const sender = pairingSender(input);
      // A stranger who keeps writing must not take the lock on every message.
      const pending = (await read()).pending.find((request) => sameSender(sender.channel, sender.senderId)(request) && request.expiresAt > now);
      if (pending) return { request: pending, created: false };
      return pairingFile.update((state) => requestIn(state, sender, newCode, ttlMs, now));
    },

    approve(input, now) {
      const code = normalizePairingCode(input);
      return pairingFile.update((state) => approveIn(state, code, now));
    },

    async isApproved(channel, senderId) {
      return (await read()).approved.some(sameSender(channel, senderId));
    },

    async listPending(now) {
      const { pending } = await read();
      return pending
        .filter((request) => request.expiresAt > now)
        .sort((left, right) => left.expiresAt - right.expiresAt || (left.code < right.code ? -1 : left.code > right.code ? 1 : 0));
    },

    async listApproved(channel) {
      const { approved } = await read();
      return approved.filter((entry) => channel === undefined || entry.channel === channel).sort((left, right) => left.approvedAt - right.approvedAt);
    },

    revoke(channel, senderId) {
      return pairingFile.update((state) => {
        const before = state.approved.length;
        state.approved = state.approved.filter((entry) => !sameSender(channel, senderId)(entry));
        const revoked = state.approved.length !== before;
        return { result: revoked, changed: revoked };
      });
    },

    async close() {
      pairingFile.closed = true;
      await pairingFile.drain();
    },
  };
}
