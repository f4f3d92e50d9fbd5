/**
 * The audit log: one JSON line per tool call (session, chat, tool, arguments, outcome, a result
 * preview, duration, attempts), secrets redacted. Two implementations behind one contract, chosen
 * by the composition root:
 *
 * - a file (one process: `countbot start` without Redis, `countbot agent`):
 *   `<directory>/tool-calls.jsonl`, rotated by size to `tool-calls.1.jsonl` …
 *   `tool-calls.<maxFiles>.jsonl` (1 is the newest). One process owns a directory: appends are
 *   serialized in memory and the size is cached, so several processes must not share one.
 * - a Redis stream (./redis-audit-log.ts), for gateways and workers on any number of machines.
 *
 * Auditing is best effort by design: `record` never rejects, and a failed write goes to `onError`
 * so a full disk cannot break a tool call.
 */
import { appendFile, mkdir, open, readFile, readdir, rename, rm } from "node:fs/promises";
import path from "node:path";
import { createRedactor, isSecretField, maskSecret } from "../config/mask.js";
import { errorMessage } from "../errors.js";
import { createKeyedQueue } from "../store/file-io.js";
import type { ToolCallRecord, ToolContext } from "./tool.js";

/** One tool call, as the agent loop knows it when the call has finished. */
export interface AuditEntry {
  sessionKey: string;
  channel: string;
  chatId: string;
  tool: string;
  /** Parsed arguments, or the raw text when they did not parse. */
  arguments: unknown;
  success: boolean;
  /** What went back to the model; only a preview is kept. */
  result: string;
  durationMs: number;
  attempts: number;
}

/** What every audit log is built with. */
export interface AuditLineOptions {
  /** Known secret values (collectSecrets(config)), scrubbed wherever they appear. */
  secrets: readonly string[];
  /** Clock in ms since epoch; injected so tests are deterministic. */
  now?: () => number;
  /** Told about every line that could not be written. Default: ignore. */
  onError?: (error: Error) => void;
}

export interface AuditLogOptions extends AuditLineOptions {
  directory: string;
  /** The current file is rotated before a line would take it past this size. */
  maxFileBytes: number;
  /** Rotated files kept besides the current one; older ones are deleted. */
  maxFiles: number;
}

export interface AuditLog {
  /** Appends one line, timed now (the call's end). Resolves when it is written or has failed; never rejects. */
  record(entry: AuditEntry): Promise<void>;
  /** The newest `limit` lines as written (JSON text, redacted), oldest first (`countbot audit tail`). */
  tail(limit: number): Promise<string[]>;
  /** Waits for pending lines; later records go to `onError`. */
  close(): Promise<void>;
}

const BASE_NAME = "tool-calls";
const ROTATED_NAME = new RegExp(`^${BASE_NAME}\\.(\\d+)\\.jsonl$`);
/** Characters of a result kept in the log. */
const RESULT_PREVIEW_CHARS = 500;
/** Each string argument is cut to this: a write_file call should not put the whole file in the log. */
const ARGUMENT_STRING_CHARS = 1_000;

/** The audit fields of a finished call, from the turn's record and the context it ran in. */
export function auditEntryOf(record: ToolCallRecord, context: Pick<ToolContext, "sessionKey" | "channel" | "chatId">): AuditEntry {
  return {
    sessionKey: context.sessionKey,
    channel: context.channel,
    chatId: context.chatId,
    tool: record.name,
    arguments: record.arguments,
    success: record.success,
    result: record.result,
    durationMs: record.durationMs,
    attempts: record.attempts,
  };
}

/** Makes the line (JSON, no newline) a call is kept as: timed now, every string redacted, arguments cut. */
export function auditLineMaker(options: Pick<AuditLineOptions, "secrets" | "now">): (entry: AuditEntry) => string {
  const now = options.now ?? Date.now;
  const redactor = createToolCallRedactor(options.secrets);
  const scrubLine = createRedactor(options.secrets);
  return (entry) => {
    // Redact before cutting, so a secret across the cut cannot half-survive.
    const text = JSON.stringify({
      time: new Date(now()).toISOString(),
      sessionKey: redactor.text(entry.sessionKey),
      channel: redactor.text(entry.channel),
      chatId: redactor.text(entry.chatId),
      tool: redactor.text(entry.tool),
      arguments: capStrings(redactor.value(entry.arguments), ARGUMENT_STRING_CHARS),
      outcome: entry.success ? "success" : "failure",
      resultPreview: truncateText(redactor.text(entry.result), RESULT_PREVIEW_CHARS),
      resultChars: entry.result.length,
      durationMs: entry.durationMs,
      attempts: entry.attempts,
    });
    // Every string was redacted before serializing, so masks never meet JSON escaping. This last
    // pass over the line as written is a safety net, kept only if the line is still JSON.
    const scrubbed = scrubLine(text);
    return scrubbed !== text && isJson(scrubbed) ? scrubbed : text;
  };
}

/** Calls `report` with `error`; a failing error handler must not break the tool call either. */
export function reporterOf(onError: AuditLineOptions["onError"], where: string): (error: unknown) => void {
  return (error) => {
    try {
      onError?.(new Error(`cannot write the audit log ${where}: ${errorMessage(error)}`, { cause: error }));
    } catch {
      // ignored on purpose
    }
  };
}

/** The file `index` rotations old (0: the current one). */
function auditFile(directory: string, index: number): string {
  return path.join(directory, index === 0 ? `${BASE_NAME}.jsonl` : `${BASE_NAME}.${index}.jsonl`);
}

/** Shifts every rotated file one older, drops the oldest, and makes the current file number 1. */
async function rotateFiles(directory: string, maxFiles: number): Promise<void> {
  await rm(auditFile(directory, maxFiles), { force: true });
  for (let index = maxFiles - 1; index >= 1; index--) {
    await rename(auditFile(directory, index), auditFile(directory, index + 1)).catch(ignoreMissing);
  }
  await rename(auditFile(directory, 0), auditFile(directory, 1));
  // Left over from a larger maxFiles setting.
  for (const name of await readdir(directory)) {
    const index = ROTATED_NAME.exec(name)?.[1];
    if (index !== undefined && Number(index) > maxFiles) await rm(path.join(directory, name), { force: true });
  }
}

/** The last `limit` lines over the current and rotated files: newest file first, until enough lines are in. */
async function tailLines(directory: string, maxFiles: number, limit: number): Promise<string[]> {
  const lines: string[] = [];
  for (let index = 0; index <= maxFiles && lines.length < limit; index++) {
    const text = await readFile(auditFile(directory, index), "utf8").catch((error: unknown) => {
      if ((error as NodeJS.ErrnoException | undefined)?.code === "ENOENT") return "";
      throw error;
    });
    lines.unshift(...text.split("\n").filter((line) => line.trim() !== ""));
  }
  return lines.slice(-Math.max(0, limit));
}

export function createFileAuditLog(options: AuditLogOptions): AuditLog {
  const file = auditFile(options.directory, 0);
  const lineOf = auditLineMaker(options);
  const queue = createKeyedQueue();
  /** Bytes in the current file; unknown until the first write and after any failure. */
  let size: number | undefined;
  /** The current file ends mid-line (a crash during an append): start the next line on its own. */
  let endsMidLine = false;
  let closed = false;

  const report = reporterOf(options.onError, file);

  async function currentSize(): Promise<number> {
    if (size !== undefined) return size;
    await mkdir(options.directory, { recursive: true });
    const handle = await open(file, "a+");
    try {
      const { size: bytes } = await handle.stat();
      const last = Buffer.alloc(1);
      if (bytes > 0) await handle.read(last, 0, 1, bytes - 1);
      endsMidLine = bytes > 0 && last[0] !== 0x0a;
      size = bytes;
      return bytes;
    } finally {
      await handle.close();
    }
  }

  const rotate = () => rotateFiles(options.directory, options.maxFiles);

  async function append(line: string): Promise<void> {
    try {
      let current = await currentSize();
      if (current > 0 && current + Buffer.byteLength(line, "utf8") > options.maxFileBytes) {
        await rotate();
        current = 0;
        endsMidLine = false;
      }
      const text = endsMidLine ? `\n${line}` : line;
      await appendFile(file, text, "utf8");
      size = current + Buffer.byteLength(text, "utf8");
      endsMidLine = false;
    } catch (error) {
      size = undefined; // stat again next time: the file may be half-written or gone
      throw error;
    }
  }

  return {
    async record(entry) {
      if (closed) {
        report(new Error("the audit log is closed"));
        return;
      }
      let line: string;
      try {
        line = `${lineOf(entry)}\n`;
      } catch (error) {
        report(error);
        return;
      }
      await queue.run(BASE_NAME, () => append(line)).catch(report);
    },
    tail: (limit) => tailLines(options.directory, options.maxFiles, limit),
    async close() {
      closed = true;
      await queue.drain();
    },
  };
}

/** Redaction for what tool calls carry: arguments, results and the text inside them. */
export interface ToolCallRedactor {
  /** Known secret values and credential-shaped text (bearer tokens, `sk-…` keys, `api_key=…`) masked. */
  text(text: string): string;
  /** A deep copy: secret-named fields masked whole, every other string (and key) through {@link text}. */
  value(value: unknown): unknown;
}

/**
 * Credentials recognizable by their shape, for secrets nobody told us about. Known values are
 * handled by createRedactor; these catch what a tool read from a file or a header.
 */
const credentialPatterns: { pattern: RegExp; replace: (found: string, ...groups: string[]) => string }[] = [
  // `scheme://user:password@host`
  { pattern: /\b([a-z][a-z0-9+.-]*:\/\/[^\s:@/]*:)([^\s@/]+)@/gi, replace: (_found, prefix) => `${prefix}****@` },
  // `Authorization: Bearer abc…`, `Basic …`
  { pattern: /\b(Bearer|Basic)(\s+)[A-Za-z0-9._~+/=-]{8,}/gi, replace: (_found, scheme, space) => `${scheme}${space}****` },
  // OpenAI-style keys: `sk-…`, `sk-proj-…`, `sk-ant-…`
  { pattern: /\bsk-[A-Za-z0-9_-]{12,}/g, replace: () => "sk-****" },
  // `api_key=…`, `"password": "…"`, `TOKEN: …`
  {
    pattern:
      /\b(api[_-]?key|access[_-]?token|auth[_-]?token|refresh[_-]?token|token|(?:client|app)[_-]?secret|secret|password|passwd)(["']?[ \t]*[:=][ \t]*["']?)([^\s"'&,;]+)/gi,
    replace: (_found, name, separator) => `${name}${separator}****`,
  },
];

/** Argument names that hold a secret beyond isSecretField's: `api_key`, `accessToken`, `client_secret`, … */
const secretNameEnding = /(apikey|token|secret|password|passwd|authorization|cookie|credential|credentials|privatekey)$/;

function isSecretArgument(key: string, parentKey: string | undefined): boolean {
  return isSecretField(key, parentKey) || secretNameEnding.test(key.toLowerCase().replace(/[_-]/g, ""));
}

export function createToolCallRedactor(secrets: readonly string[]): ToolCallRedactor {
  const redactKnown = createRedactor(secrets);
  const text = (input: string): string =>
    credentialPatterns.reduce((current, { pattern, replace }) => current.replace(pattern, replace), redactKnown(input));

  const value = (input: unknown, key?: string, parentKey?: string): unknown => {
    if (key !== undefined && isSecretArgument(key, parentKey) && (typeof input === "string" || typeof input === "number")) {
      return maskSecret(String(input));
    }
    if (typeof input === "string") return text(input);
    if (Array.isArray(input)) return input.map((item) => value(item, undefined, key));
    if (typeof input === "object" && input !== null) {
      return Object.fromEntries(Object.entries(input).map(([name, item]) => [text(name), value(item, name, key)]));
    }
    return input;
  };
  return { text, value: (input) => value(input) };
}

/** The head of `text` and how much was cut. */
export function truncateText(text: string, maxChars: number): string {
  if (text.length <= maxChars) return text;
  return `${text.slice(0, maxChars)}…[${text.length - maxChars} more characters]`;
}

/** A deep copy with every string cut to `maxChars`. */
export function capStrings(value: unknown, maxChars: number): unknown {
  if (typeof value === "string") return truncateText(value, maxChars);
  if (Array.isArray(value)) return value.map((item) => capStrings(item, maxChars));
  if (typeof value === "object" && value !== null) {
    return Object.fromEntries(Object.entries(value).map(([name, item]) => [name, capStrings(item, maxChars)]));
  }
  return value;
}

function isJson(text: string): boolean {
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
}

function ignoreMissing(error: unknown): void {
  if ((error as NodeJS.ErrnoException | undefined)?.code !== "ENOENT") throw error;
}
