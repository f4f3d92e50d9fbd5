/**
 * DM pairing in the Redis store, shared by every gateway of a deployment and by
 * `countbot pairing approve` run anywhere.
 *
 * Layout, under the deployment's hash tag:
 * - `{p}:pairing:codes` HASH code → request JSON
 * - `{p}:pairing:senders` HASH `<channel>:<senderId>` → code of the sender's pending request
 * - `{p}:pairing:expiry` ZSET code → expiresAt, for expiry and `listPending`
 * - `{p}:pairing:approved` HASH `<channel>:<senderId>` → approval JSON
 *
 * Channel names have no `:` (the bus's rule, checked on the way in), so the field is unambiguous.
 * `request` and `approve` are Lua scripts (./lua): one sender never holds two codes, and a code is
 * approved at most once even when two operators approve it at the same moment. Expiry compares
 * the caller's `now`, not Redis key TTLs, so both stores expire codes alike (and tests can tell).
 */
import type { z } from "zod";
import { hashTag, type RedisClient } from "../redis/client.js";
import { loadScript, runScript } from "../redis/scripts.js";
import {
  ApprovedPairingSchema,
  PairingRequestSchema,
  generatePairingCode,
  normalizePairingCode,
  pairingSender,
} from "./file-pairing.js";
import type { PairingRequest, PairingSender, PairingStore } from "./store.js";

export interface RedisPairingStoreOptions {
  redis: RedisClient;
  /** The deployment's key prefix; keys live under the hash tag `{prefix}`. */
  prefix: string;
  /** Code generator; injected so tests can force collisions. Default: generatePairingCode. */
  newCode?: () => string;
}

export interface RedisPairingKeys {
  codes: string;
  senders: string;
  expiry: string;
  approved: string;
}

export function redisPairingKeys(prefix: string): RedisPairingKeys {
  const base = `${hashTag(prefix)}:pairing`;
  return { codes: `${base}:codes`, senders: `${base}:senders`, expiry: `${base}:expiry`, approved: `${base}:approved` };
}

const scriptsDirectory = new URL("./lua/", import.meta.url);
const scripts = {
  request: loadScript(scriptsDirectory, "request-pairing-3.lua"),
  approve: loadScript(scriptsDirectory, "approve-pairing-4.lua"),
};

const CHANNEL_NAME = /^[\w-]+(\.[\w-]+)?$/;
const MAX_CODE_ATTEMPTS = 100;

function senderField(channel: string, senderId: string): string {
  return `${channel}:${senderId}`;
}

function parseStored<Schema extends z.ZodType>(schema: Schema, text: string | null | undefined): z.output<Schema> | undefined {
  if (text == null) return undefined;
  try {
    const parsed = schema.safeParse(JSON.parse(text));
    return parsed.success ? parsed.data : undefined;
  } catch {
    return undefined; // not ours: skipped rather than failing every listing
  }
}

export function createRedisPairingStore(options: RedisPairingStoreOptions): PairingStore & { close(): Promise<void> } {
  const { redis } = options;
  const keys = redisPairingKeys(options.prefix);
  const newCode = options.newCode ?? generatePairingCode;
  let closed = false;

  function assertOpen(): void {
    if (closed) throw new Error("the redis store is closed");
  }

  return {
    async request(input, { ttlMs, now }) {
      assertOpen();
      const sender: PairingSender = pairingSender(input);
      const field = senderField(sender.channel, sender.senderId);
      for (let attempt = 0; attempt < MAX_CODE_ATTEMPTS; attempt++) {
        const request: PairingRequest = { ...sender, code: newCode(), requestedAt: now, expiresAt: now + ttlMs };
        const keyList = [keys.codes, keys.senders, keys.expiry];
        const reply = (await runScript(redis, scripts.request, keyList, [now, field, request.code, JSON.stringify(request), request.expiresAt])) as [
          number,
          string?,
        ];
        if (reply[0] === 2) continue; // the code is someone else's: draw another
        const stored = parseStored(PairingRequestSchema, reply[1]);
        if (!stored) throw new Error(`pairing request of ${field} is unreadable in Redis`);
        return { request: stored, created: reply[0] === 1 };
      }
      throw new Error("could not find a free pairing code");
    },

    async approve(code, now) {
      assertOpen();
      const keyList = [keys.codes, keys.senders, keys.expiry, keys.approved];
      const reply = (await runScript(redis, scripts.approve, keyList, [normalizePairingCode(code), String(Math.floor(now))])) as string | null;
      return parseStored(ApprovedPairingSchema, reply);
    },

    async isApproved(channel, senderId) {
      assertOpen();
      if (!CHANNEL_NAME.test(channel)) return false;
      return (await redis.hexists(keys.approved, senderField(channel, senderId))) === 1;
    },

    async listPending(now) {
      assertOpen();
      const codes = await redis.zrangebyscore(keys.expiry, `(${now}`, "+inf");
      if (codes.length === 0) return [];
      const texts = await redis.hmget(keys.codes, ...codes);
      return texts.flatMap((text) => {
        const request = parseStored(PairingRequestSchema, text);
        return request ? [request] : [];
      });
    },

    async listApproved(channel) {
      assertOpen();
      const texts = Object.values(await redis.hgetall(keys.approved));
      return texts
        .flatMap((text) => {
          const entry = parseStored(ApprovedPairingSchema, text);
          return entry ? [entry] : [];
        })
        .filter((entry) => channel === undefined || entry.channel === channel)
        .sort((left, right) => left.approvedAt - right.approvedAt);
    },

    async revoke(channel, senderId) {
      assertOpen();
      if (!CHANNEL_NAME.test(channel)) return false;
      return (await redis.hdel(keys.approved, senderField(channel, senderId))) === 1;
    },

    async close() {
      closed = true;
    },
  };
}
