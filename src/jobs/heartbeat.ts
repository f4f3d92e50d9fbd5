/**
 * The heartbeat (off by default): every N minutes the agent is asked, through a `system` message
 * into the owner's session, to read `HEARTBEAT.md` in its workspace and decide whether to write to
 * the owner. With nothing to say it replies exactly {@link HEARTBEAT_OK}, and that reply is not
 * delivered ({@link isSilentHeartbeatReply}).
 *
 * A beat is skipped when:
 * - it falls in the quiet hours (wall clock in their time zone; `22:00`–`08:00` wraps midnight);
 * - the daily cap is reached. The cap counts messages the owner actually received: whoever delivers
 *   a heartbeat reply that is not silent calls {@link Heartbeat.recordDelivered}. A prompt answered
 *   with HEARTBEAT_OK costs nothing, so the agent may check often and write rarely. The day runs
 *   midnight to midnight in the quiet hours' time zone (UTC without quiet hours);
 * - `HEARTBEAT.md` is missing or blank: there is nothing to check.
 *
 * It does not depend on a Scheduler: with several workers, run it in one process (e.g. the leader).
 */
import { readFile } from "node:fs/promises";
import path from "node:path";
import { errorMessage } from "../errors.js";

/** The whole reply of an agent that has nothing to tell the owner. */
export const HEARTBEAT_OK = "HEARTBEAT_OK";
export const HEARTBEAT_FILE = "HEARTBEAT.md";
/** Opens every heartbeat prompt, so a turn can tell it is answering one ({@link isHeartbeatPrompt}). */
export const HEARTBEAT_PROMPT_PREFIX = "[heartbeat]";

/**
 * Whether a reply means "nothing to say": HEARTBEAT_OK alone, tolerating what models wrap it in
 * (whitespace, quotes, `code`, **bold**, a final period).
 */
export function isSilentHeartbeatReply(text: string): boolean {
  const bare = text.trim().replace(/^[\s*_`"'“”]+|[\s*_`"'“”.!]+$/g, "");
  return bare === HEARTBEAT_OK;
}

/** Whether a system message is a heartbeat prompt. */
export function isHeartbeatPrompt(content: string): boolean {
  return content.startsWith(HEARTBEAT_PROMPT_PREFIX);
}

export interface QuietHours {
  /** `HH:MM`, 24 h: quiet from here… */
  start: string;
  /** …until here (exclusive). Earlier than `start` means across midnight. */
  end: string;
  /** IANA time zone of the two times. */
  timezone: string;
}

export type CancelTimer = () => void;
export type SetTimer = (callback: () => void, delayMs: number) => CancelTimer;

export interface HeartbeatOptions {
  intervalMinutes: number;
  quietHours?: QuietHours;
  /** Heartbeat messages the owner may receive per day. */
  dailyCap: number;
  /** The owner's session (`channel:chat_id`); the prompt goes there and so does the reply. */
  targetSessionKey: string;
  /** The agent's workspace, which holds HEARTBEAT.md. */
  workspace: string;
  /** Posts a `system` message into a session (the agent answers it in that session's chat). */
  publishSystem(sessionKey: string, content: string): Promise<void>;
  /** Clock in ms since epoch. Default: Date.now. */
  now?: () => number;
  /** Default: an unref'd setTimeout. */
  setTimer?: SetTimer;
  logger?: { warn(fields: Record<string, unknown>, message: string): void };
  /** Shared count of delivered messages; default: this process's memory. */
  counter?: DeliveryCounter;
}

/**
 * Where delivered heartbeat messages are counted, per day. Shared (Redis) when several workers run:
 * the worker that answers a heartbeat need not be the one that beats.
 */
export interface DeliveryCounter {
  increment(day: string): Promise<void>;
  get(day: string): Promise<number>;
}

export type BeatOutcome = "posted" | "quiet-hours" | "daily-cap" | "no-file" | "failed";

export interface Heartbeat {
  /** Beat every `intervalMinutes`, the first one an interval from now. */
  start(): void;
  stop(): void;
  /** One beat now (the timer calls this); says what it did. */
  beat(): Promise<BeatOutcome>;
  /** A heartbeat reply that was not silent reached the owner: it counts toward the daily cap. */
  recordDelivered(): void;
  /** Messages delivered today (in the cap's day). */
  deliveredToday(): number;
}

const defaultSetTimer: SetTimer = (callback, delayMs) => {
  const timer = setTimeout(callback, delayMs);
  timer.unref();
  return () => clearTimeout(timer);
};

export function createHeartbeat(options: HeartbeatOptions): Heartbeat {
  const now = options.now ?? Date.now;
  const setTimer = options.setTimer ?? defaultSetTimer;
  if (!(options.intervalMinutes > 0)) throw new Error(`heartbeat intervalMinutes must be positive (got ${options.intervalMinutes})`);
  const intervalMs = options.intervalMinutes * 60_000;
  const dayZone = options.quietHours?.timezone ?? "UTC";
  const quiet = options.quietHours ? parseQuietHours(options.quietHours) : undefined;
  let delivered = { day: "", count: 0 };
  let cancel: CancelTimer | undefined;
  // Bumped by stop(): a beat still running from before does not re-arm a stopped (or restarted) loop.
  let generation = 0;

  const deliveredToday = (): number => (delivered.day === dayKey(now(), dayZone) ? delivered.count : 0);

  const beat = async (): Promise<BeatOutcome> => {
    const at = now();
    if (quiet && isQuiet(at, quiet)) return "quiet-hours";
    const sent = options.counter ? await options.counter.get(dayKey(at, dayZone)).catch(() => deliveredToday()) : deliveredToday();
    if (sent >= options.dailyCap) return "daily-cap";
    const file = path.join(options.workspace, HEARTBEAT_FILE);
    const text = await readFile(file, "utf8").catch(() => "");
    if (text.trim() === "") return "no-file";
    try {
      await options.publishSystem(options.targetSessionKey, heartbeatPrompt(at, dayZone));
      return "posted";
    } catch (error) {
      options.logger?.warn({ sessionKey: options.targetSessionKey, error: errorMessage(error) }, "posting the heartbeat failed");
      return "failed";
    }
  };

  const schedule = (loop: number): void => {
    cancel = setTimer(() => {
      void beat().finally(() => {
        if (loop === generation) schedule(loop);
      });
    }, intervalMs);
  };

  return {
    start() {
      if (cancel) return;
      schedule(generation);
    },
    stop() {
      generation += 1;
      cancel?.();
      cancel = undefined;
    },
    beat,
    recordDelivered() {
      const today = dayKey(now(), dayZone);
      delivered = { day: today, count: delivered.day === today ? delivered.count + 1 : 1 };
      void options.counter?.increment(today).catch((error: unknown) => options.logger?.warn({ error: errorMessage(error) }, "counting a heartbeat failed"));
    },
    deliveredToday,
  };
}

/** The system message that asks the agent to check HEARTBEAT.md. */
export function heartbeatPrompt(at: number, timezone: string): string {
  const wall = wallClock(at, timezone);
  return [
    `${HEARTBEAT_PROMPT_PREFIX} Scheduled check-in (${wall.date} ${wall.time} ${timezone}).`,
    `Read ${HEARTBEAT_FILE} in your workspace and follow it. Decide whether something is worth writing to the owner now.`,
    "If it is, your reply is that message. If there is nothing to say, reply with exactly",
    `${HEARTBEAT_OK} and nothing else. Do not repeat old tasks or messages from earlier in the chat.`,
  ].join(" ");
}

interface QuietMinutes {
  start: number;
  end: number;
  timezone: string;
}

function parseQuietHours(hours: QuietHours): QuietMinutes {
  return { start: minutesOf(hours.start), end: minutesOf(hours.end), timezone: hours.timezone };
}

function minutesOf(time: string): number {
  const match = /^([01]?\d|2[0-3]):([0-5]\d)$/.exec(time.trim());
  if (!match) throw new Error(`quiet hours time "${time}" is not HH:MM`);
  return Number(match[1]) * 60 + Number(match[2]);
}

function isQuiet(at: number, quiet: QuietMinutes): boolean {
  if (quiet.start === quiet.end) return false;
  const [hour, minute] = wallClock(at, quiet.timezone).time.split(":").map(Number) as [number, number];
  const minutes = hour * 60 + minute;
  return quiet.start < quiet.end ? minutes >= quiet.start && minutes < quiet.end : minutes >= quiet.start || minutes < quiet.end;
}

function dayKey(at: number, timezone: string): string {
  return wallClock(at, timezone).date;
}

/** `{ date: "2025-06-01", time: "09:05" }` in `timezone`. */
function wallClock(at: number, timezone: string): { date: string; time: string } {
  const parts = new Intl.DateTimeFormat("en-CA", {
    timeZone: timezone,
    hourCycle: "h23",
    year: "numeric",
    month: "2-digit",
    day: "2-digit",
    hour: "2-digit",
    minute: "2-digit",
  }).formatToParts(at);
  const part = (type: Intl.DateTimeFormatPartTypes): string => parts.find((entry) => entry.type === type)?.value ?? "00";
  return { date: `${part("year")}-${part("month")}-${part("day")}`, time: `${part("hour")}:${part("minute")}` };
}
