/**
 * The operator's overview, read-only (the web console's Operations view):
 *
 *   GET /api/operations                 readiness and its checks, each channel's health (state, since
 *                                       when, last error, messages in and out), chats waiting and being answered,
 *                                       background queues, task counts, processes (over Redis),
 *                                       and where metrics and the queue dashboard are
 *   GET /api/dead-letters?limit=        the newest dead letters: turns given up on, with their messages
 *
 * Register it inside the scope that checks the bearer token: dead letters hold what users wrote.
 */
import type { FastifyInstance } from "fastify";
import { z } from "zod";
import type { BusOps, DeadLetter } from "../bus/message-bus.js";
import { errorMessage } from "../errors.js";
import { parseRequest } from "../gateway/http-request.js";
import type { JobCounts } from "../jobs/job-queue.js";
import type { TaskStore } from "../store/store.js";
import type { Readiness } from "./server.js";

/** A gateway or worker that said lately that it is alive. */
export interface ProcessSummary {
  role: string;
  host: string;
  pid: number;
  startedAt: number;
  seenAt: number;
}

export interface OperationRoutesOptions {
  /** `memory`: one process; `redis`: gateways and workers over Redis. */
  kind: "memory" | "redis";
  bus: Pick<BusOps, "stats" | "deadLetters">;
  readiness: () => Promise<Readiness>;
  tasks: Pick<TaskStore, "stats">;
  /** Jobs waiting, running and failed per background queue. */
  queues?: () => Promise<Array<{ queue: string } & JobCounts>>;
  processes?: () => Promise<ProcessSummary[]>;
  /** Paths of the other operator pages this server serves, or null when it does not. */
  links: { metrics: string | null; queues: string | null };
  /** How long each part of the overview may take before it is shown as missing. Default 3 s. */
  partTimeoutMs?: number;
}

const PART_TIMEOUT_MS = 3_000;

const DeadLetterQuerySchema = z.strictObject({
  limit: z.preprocess(
    (value) => (value === "" ? undefined : value),
    z
      .string()
      .regex(/^\d+$/, "a whole number")
      .transform(Number)
      .pipe(z.number().int().min(1).max(500))
      .default(50),
  ),
});

/** A dead letter's messages are shown cut: the list is for seeing what went wrong, not for reading chats. */
const MAX_CONTENT = 2_000;

const iso = (ms: number) => new Date(ms).toISOString();

function deadLetterJson(letter: DeadLetter) {
  return {
    sessionKey: letter.sessionKey,
    reason: letter.reason,
    at: iso(letter.at),
    messages: letter.messages.map((message) => ({
      id: message.id,
      senderId: message.senderId,
      content: message.content.length > MAX_CONTENT ? `${message.content.slice(0, MAX_CONTENT)}…` : message.content,
      receivedAt: iso(message.receivedAt),
    })),
  };
}

export function registerOperationRoutes(scope: FastifyInstance, options: OperationRoutesOptions): void {
  // The page an operator opens when something is wrong: a part that hangs (a Redis that is down
  // queues commands until it is back) or fails is shown as missing, and the rest still answers.
  scope.get("/api/operations", async () => {
    const missing: string[] = [];
    const part = <T>(what: string, work: () => Promise<T>, fallback: T) => withinDeadline(what, work, fallback, options.partTimeoutMs ?? PART_TIMEOUT_MS, missing);
    const [readiness, sessions, tasks, queues, processes] = await Promise.all([
      part<Readiness>("readiness", () => options.readiness().catch((error: unknown) => ({ ready: false, checks: { readiness: { ok: false, detail: errorMessage(error) } } })), { ready: false, checks: {} }),
      part("chats waiting and answered", () => options.bus.stats(), { ready: 0, leased: 0, deadLetters: 0 }),
      part("task counts", () => options.tasks.stats(), { total: 0, pending: 0, running: 0, completed: 0, failed: 0, cancelled: 0 }),
      part("background queues", () => options.queues?.() ?? Promise.resolve([]), []),
      part("processes", () => options.processes?.() ?? Promise.resolve([]), []),
    ]);
    const checks = missing.length > 0 ? { ...readiness.checks, overview: { ok: false, detail: `not shown (0 or none in their place): ${missing.join("; ")}` } } : readiness.checks;
    return {
      kind: options.kind,
      ready: readiness.ready && Object.values(checks).every((check) => check.ok),
      checks,
      channels: readiness.channels ?? [],
      sessions: { waiting: sessions.ready, answering: sessions.leased, deadLetters: sessions.deadLetters },
      queues: queues.map((counts) => ({ queue: counts.queue, waiting: counts.waiting, active: counts.active, failed: counts.failed })),
      tasks,
      processes: processes.map((process) => ({ role: process.role, host: process.host, pid: process.pid, startedAt: iso(process.startedAt), seenAt: iso(process.seenAt) })),
      links: options.links,
    };
  });

  scope.get("/api/dead-letters", async (request) => {
    const { limit } = parseRequest(DeadLetterQuerySchema, request.query, "query");
    return (await options.bus.deadLetters(limit)).map(deadLetterJson);
  });
}

/** `work`'s answer, or `fallback` (noted in `missing`) when it fails or takes longer than `timeoutMs`. */
async function withinDeadline<T>(what: string, work: () => Promise<T>, fallback: T, timeoutMs: number, missing: string[]): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<T>((resolve) => {
    timer = setTimeout(() => {
      missing.push(`${what}: no answer within ${timeoutMs} ms`);
      resolve(fallback);
    }, timeoutMs);
  });
  const answered = work().catch((error: unknown) => {
    missing.push(`${what}: ${errorMessage(error)}`);
    return fallback;
  });
  try {
    return await Promise.race([answered, late]);
  } finally {
    clearTimeout(timer);
  }
}
