/**
 * The audit log as a Redis stream, for gateways and workers on any number of machines: every
 * process XADDs its lines to one stream, so writers never race (each XADD is atomic, no file is
 * shared, no size is cached), and `countbot audit tail` reads the whole deployment's calls from
 * anywhere. The stream is trimmed as it grows (`MAXLEN ~ maxEntries`): Redis runs without
 * eviction, and a log nobody trims would fill it. Keep a longer record by shipping it elsewhere.
 *
 * Layout, under the deployment's hash tag: `{p}:audit` STREAM, one entry per call, field `line`
 * holding the JSON line the file log would write.
 */
import { hashTag, type RedisClient } from "../redis/client.js";
import { type AuditLineOptions, type AuditLog, auditLineMaker, reporterOf } from "./audit-log.js";

export interface RedisAuditLogOptions extends AuditLineOptions {
  redis: RedisClient;
  /** The deployment's key prefix; keys live under the hash tag `{prefix}`. */
  prefix: string;
  /** Lines kept, about (the stream is trimmed approximately, which is cheap). Default 20,000. */
  maxEntries?: number;
}

export const DEFAULT_AUDIT_STREAM_ENTRIES = 20_000;

export function redisAuditKey(prefix: string): string {
  return `${hashTag(prefix)}:audit`;
}

export function createRedisAuditLog(options: RedisAuditLogOptions): AuditLog {
  const { redis } = options;
  const key = redisAuditKey(options.prefix);
  const maxEntries = options.maxEntries ?? DEFAULT_AUDIT_STREAM_ENTRIES;
  const lineOf = auditLineMaker(options);
  const report = reporterOf(options.onError, `stream ${key}`);
  const pending = new Set<Promise<void>>();
  let closed = false;

  return {
    record(entry) {
      if (closed) {
        report(new Error("the audit log is closed"));
        return Promise.resolve();
      }
      const written = (async () => {
        try {
          await redis.xadd(key, "MAXLEN", "~", maxEntries, "*", "line", lineOf(entry));
        } catch (error) {
          report(error);
        }
      })();
      pending.add(written);
      void written.finally(() => pending.delete(written));
      return written;
    },

    async tail(limit) {
      if (limit <= 0) return [];
      const entries = await redis.xrevrange(key, "+", "-", "COUNT", limit);
      return entries
        .flatMap(([, fields]) => {
          const index = fields.indexOf("line");
          return index >= 0 && index % 2 === 0 && fields[index + 1] !== undefined ? [fields[index + 1]!] : [];
        })
        .reverse();
    },

    async close() {
      closed = true;
      await Promise.all([...pending]);
    },
  };
}
