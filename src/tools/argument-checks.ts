/**
 * Runs MCP tool argument checks in a worker thread, one at a time, each with a deadline. A tool's
 * schema comes from its server, so the check is untrusted work: patterns are linear-time already
 * (./linear-regexp.ts), but Ajv has other costs an adversary controls (nested `anyOf` over
 * self-references grows exponentially with the arguments' depth, `uniqueItems` quadratically with
 * an array's length). In the worker, such a check holds no event loop but its own; past the
 * deadline the worker is ended (which stops even a tight loop), the check fails with a message the
 * model can act on, and the next check starts a new worker.
 *
 * The main thread's share is posting the arguments (a structured clone of what the model sent) and
 * reading the answer. The worker is unref'd: it never keeps a process alive.
 */
import { createRequire } from "node:module";
import { pathToFileURL } from "node:url";
import { Worker } from "node:worker_threads";
import type { ArgumentIssue } from "./tool.js";

/** What one check found; `timedOut` when the deadline passed first. */
export type CheckOutcome = { ok: true } | { ok: false; issues: ArgumentIssue[] } | { ok: false; timedOut: true };

export interface ArgumentChecksOptions {
  /** The longest one check may run. Default 500 ms: a sound check takes well under a millisecond. */
  deadlineMs?: number;
}

interface Job {
  key: string;
  dialect: string;
  schema: Record<string, unknown>;
  value: unknown;
  resolve(outcome: CheckOutcome): void;
  reject(error: Error): void;
}

/** A worker that has not loaded by then is given up (its check fails; the next starts another). */
const STARTUP_LIMIT_MS = 30_000;

type Answer = { id: number; ok: true } | { id: number; ok: false; issues: ArgumentIssue[] } | { id: number; error: string };

export class ArgumentChecks {
  private readonly deadlineMs: number;
  private worker: Worker | undefined;
  private ready: Promise<void> | undefined;
  /** Schemas the current worker has been sent. */
  private readonly known = new Set<string>();
  private readonly queue: Job[] = [];
  private running = false;
  private nextId = 0;
  private closed = false;

  constructor(options: ArgumentChecksOptions = {}) {
    this.deadlineMs = options.deadlineMs ?? 500;
  }

  /** Checks `value` against the schema compiled under `key`. */
  check(key: string, dialect: string, schema: Record<string, unknown>, value: unknown): Promise<CheckOutcome> {
    if (this.closed) return Promise.reject(new Error("argument checks are closed"));
    return new Promise((resolve, reject) => {
      this.queue.push({ key, dialect, schema, value, resolve, reject });
      this.next();
    });
  }

  /** Ends the worker; checks still queued fail. */
  async close(): Promise<void> {
    this.closed = true;
    for (const job of this.queue.splice(0)) job.reject(new Error("argument checks are closed"));
    const worker = this.worker;
    this.worker = undefined;
    this.ready = undefined;
    await worker?.terminate();
  }

  private next(): void {
    if (this.running) return;
    const job = this.queue.shift();
    if (!job) return;
    this.running = true;
    const { worker, ready } = this.ensureWorker();
    const done = (outcome: CheckOutcome | Error) => {
      this.running = false;
      if (outcome instanceof Error) job.reject(outcome);
      else job.resolve(outcome);
      this.next();
    };
    // The deadline counts the check, not the worker's start (loading Ajv takes longer than a check).
    ready.then(
      () => this.run(worker, job, done),
      (error: unknown) => done(error instanceof Error ? error : new Error(String(error))),
    );
  }

  private run(worker: Worker, job: Job, done: (outcome: CheckOutcome | Error) => void): void {
    const id = ++this.nextId;
    const firstTime = !this.known.has(job.key);
    this.known.add(job.key);
    const finish = (outcome: CheckOutcome | Error) => {
      clearTimeout(timer);
      worker.off("message", onMessage);
      worker.off("error", onError);
      done(outcome);
    };
    const onMessage = (answer: Answer) => {
      if (answer.id !== id) return;
      if ("error" in answer) finish(new Error(answer.error));
      else finish(answer.ok ? { ok: true } : { ok: false, issues: answer.issues });
    };
    const onError = (error: Error) => {
      this.discard(worker);
      finish(error);
    };
    const timer = setTimeout(() => {
      this.discard(worker);
      finish({ ok: false, timedOut: true });
    }, this.deadlineMs);
    worker.on("message", onMessage);
    worker.on("error", onError);
    worker.postMessage(firstTime ? { id, key: job.key, dialect: job.dialect, schema: job.schema, value: job.value } : { id, key: job.key, value: job.value });
  }

  /** Starts the worker ahead of the first check (when a schema is registered). */
  warmUp(): void {
    if (!this.closed) this.ensureWorker();
  }

  private discard(worker: Worker): void {
    if (this.worker !== worker) return;
    this.worker = undefined;
    this.ready = undefined;
    this.known.clear();
    void worker.terminate();
  }

  private ensureWorker(): { worker: Worker; ready: Promise<void> } {
    if (this.worker && this.ready) return { worker: this.worker, ready: this.ready };
    const source = import.meta.url.endsWith(".ts");
    const entry = new URL(`./argument-check-worker.${source ? "ts" : "js"}`, import.meta.url);
    // Run from the TypeScript sources (tsx, the tests), the worker needs the same loader.
    const execArgv = source ? ["--import", pathToFileURL(createRequire(import.meta.url).resolve("tsx")).href] : [];
    const worker = new Worker(entry, { execArgv, resourceLimits: { maxOldGenerationSizeMb: 256 } });
    worker.unref();
    const ready = new Promise<void>((resolve, reject) => {
      const onReady = (message: unknown) => {
        if ((message as { ready?: boolean }).ready !== true) return;
        worker.off("message", onReady);
        worker.off("error", reject);
        resolve();
      };
      worker.on("message", onReady);
      worker.once("error", reject);
      setTimeout(() => reject(new Error(`the argument-check worker did not start within ${STARTUP_LIMIT_MS / 1000} s`)), STARTUP_LIMIT_MS).unref();
    });
    // A start that failed is seen by the check waiting for it; nobody else waits.
    ready.catch(() => this.discard(worker));
    this.worker = worker;
    this.ready = ready;
    return { worker, ready };
  }
}
