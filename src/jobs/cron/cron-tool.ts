/**
 * The `cron` tool: the model schedules a message to itself in the current chat — once at a time,
 * every N seconds, or on a cron expression in a time zone — and lists or removes that chat's jobs.
 * When a job fires, the Scheduler posts a `system` message into the session and the agent answers
 * in its chat. A chat sees and removes only its own jobs.
 */
import { randomBytes } from "node:crypto";
import { CronExpressionParser } from "cron-parser";
import { z } from "zod";
import { ToolError } from "../../errors.js";
import { nextDueTime } from "./in-process-scheduler.js";
import type { CronJob, CronSchedule, Scheduler } from "./scheduler.js";
import { defineTool, type Tool } from "../../tools/tool.js";

/** Shortest `every_seconds` the tool accepts. */
export const MIN_EVERY_SECONDS = 10;

const parameters = z.object({
  action: z.enum(["add", "list", "remove"]).describe("`add` a job, `list` this chat's jobs, or `remove` one by `id`."),
  message: z.string().optional().describe("add: what you will be told when the job fires, e.g. \"Remind the user to stretch\"."),
  at: z
    .string()
    .optional()
    .describe("add, once: an ISO time, e.g. 2025-06-01T09:00:00+08:00, or 2025-06-01T09:00 read in `timezone`."),
  every_seconds: z.number().int().optional().describe(`add, repeating: the interval in seconds (at least ${MIN_EVERY_SECONDS}).`),
  cron: z.string().optional().describe("add, repeating: a cron expression, 5 fields (minute hour day month weekday) or 6 with seconds first, e.g. \"0 9 * * 1-5\"."),
  timezone: z.string().optional().describe("IANA time zone for `cron` and for an `at` without an offset, e.g. Asia/Shanghai."),
  id: z.string().optional().describe("remove: the job id, as `add` or `list` gave it."),
});

export interface CronToolOptions {
  now?: () => number;
  newId?: () => string;
  /** Time zone of `cron` and of an `at` without an offset when the call names none. Default UTC. */
  defaultTimezone?: string;
  /** Jobs one chat may have. Default 50. */
  maxJobsPerSession?: number;
}

export function createCronTool(scheduler: Scheduler, options: CronToolOptions = {}): Tool<typeof parameters> {
  const now = options.now ?? Date.now;
  const newId = options.newId ?? (() => `cron-${randomBytes(4).toString("hex")}`);
  const defaultTimezone = options.defaultTimezone ?? "UTC";
  const maxJobs = options.maxJobsPerSession ?? 50;

  return defineTool({
    name: "cron",
    description:
      "Schedule a message to yourself in this chat: once (`at`), every N seconds (`every_seconds`) or on a cron " +
      "expression (`cron`, with `timezone`). When it fires you get the `message` and answer in this chat, e.g. a " +
      "reminder. Also `list` this chat's jobs and `remove` one by id.",
    parameters,
    async execute(args, context) {
      if (args.action === "list") {
        const jobs = await scheduler.list(context.sessionKey);
        if (jobs.length === 0) return "No scheduled jobs in this chat.";
        return [`${jobs.length} scheduled job(s) in this chat:`, ...jobs.map((job) => `- ${job.id}: ${describeSchedule(job, now(), defaultTimezone)} — "${excerpt(job.message)}"`)].join("\n");
      }

      if (args.action === "remove") {
        const id = args.id?.trim();
        if (!id) throw new ToolError("`id` is required to remove a job", 'Call cron with action "list" to see the ids of this chat\'s jobs.');
        const owned = await scheduler.list(context.sessionKey);
        // Another chat's job gets the same answer as a missing one: ids of other chats stay private.
        if (!owned.some((job) => job.id === id) || !(await scheduler.remove(id))) {
          throw new ToolError(`there is no job "${id}" in this chat`, 'Call cron with action "list" to see the ids of this chat\'s jobs.');
        }
        return `Removed ${id}.`;
      }

      const message = args.message?.trim();
      if (!message) throw new ToolError("`message` is required to add a job", "Pass in `message` what you want to be told when the job fires.");
      const schedule = parseSchedule(args, now(), defaultTimezone);
      const timezone = args.timezone?.trim() || defaultTimezone;
      if ((await scheduler.list(context.sessionKey)).length >= maxJobs) {
        throw new ToolError(`this chat already has ${maxJobs} scheduled jobs, the most allowed`, 'Remove jobs that are no longer needed (action "remove") first.');
      }
      const job: CronJob = { id: newId(), sessionKey: context.sessionKey, message, schedule, createdAt: now() };
      await scheduler.add(job);
      return `Scheduled ${job.id}: ${describeSchedule(job, now(), timezone)}.`;
    },
  });
}

type ScheduleArguments = Pick<z.infer<typeof parameters>, "at" | "every_seconds" | "cron" | "timezone">;

function parseSchedule(args: ScheduleArguments, now: number, defaultTimezone: string): CronSchedule {
  const given = (["at", "every_seconds", "cron"] as const).filter((key) => args[key] !== undefined && args[key] !== "");
  if (given.length !== 1) {
    const got = given.length === 0 ? "none of them" : given.map((key) => `\`${key}\``).join(" and ");
    throw new ToolError(
      `add needs exactly one of \`at\`, \`every_seconds\` or \`cron\` (got ${got})`,
      "Pass `at` for once, `every_seconds` for a fixed interval, or `cron` for a calendar schedule — only one.",
    );
  }
  const timezone = args.timezone?.trim() || defaultTimezone;
  if (!isValidTimeZone(timezone)) {
    throw new ToolError(`unknown time zone "${timezone}"`, "Use an IANA time zone name such as UTC, Europe/Berlin or Asia/Shanghai.");
  }

  if (args.every_seconds !== undefined) {
    if (args.every_seconds < MIN_EVERY_SECONDS) {
      throw new ToolError(`\`every_seconds\` must be at least ${MIN_EVERY_SECONDS} (got ${args.every_seconds})`, `Use an interval of ${MIN_EVERY_SECONDS} seconds or more.`);
    }
    return { kind: "every", seconds: args.every_seconds };
  }

  if (args.cron !== undefined) {
    const expression = args.cron.trim().replace(/\s+/g, " ");
    const hint = 'Use 5 fields "minute hour day-of-month month day-of-week" (e.g. "0 9 * * 1-5"), or 6 with seconds first.';
    const fields = expression.split(" ").length;
    if (!expression.startsWith("@") && fields !== 5 && fields !== 6) {
      throw new ToolError(`invalid cron expression "${args.cron}": it has ${fields} field(s)`, hint);
    }
    try {
      CronExpressionParser.parse(expression, { tz: timezone }).next();
    } catch (error) {
      throw new ToolError(`invalid cron expression "${args.cron}" (${(error as Error).message})`, hint, { cause: error });
    }
    return { kind: "cron", expression, timezone };
  }

  const text = (args.at ?? "").trim();
  const at = parseIsoTime(text, timezone);
  if (at === undefined) {
    throw new ToolError(`\`at\` is not an ISO time: "${text}"`, `Use the form 2025-06-01T09:00:00+08:00, or 2025-06-01T09:00 with \`timezone\` (default ${defaultTimezone}).`);
  }
  if (at <= now) {
    throw new ToolError(`\`at\` ${text} is in the past (it is now ${formatTime(now, timezone)})`, "Pass a time in the future.");
  }
  return { kind: "at", at };
}

const isoPattern = /^(\d{4})-(\d{2})-(\d{2})[T ](\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,3})\d*)?)?(Z|[+-]\d{2}:?\d{2})?$/i;

/** An ISO date-time → ms since epoch; without an offset it is a wall-clock time in `timezone`. */
export function parseIsoTime(text: string, timezone: string): number | undefined {
  const match = isoPattern.exec(text);
  if (!match) return undefined;
  const [, year, month, day, hour, minute, seconds = "0", fraction = "0", offset] = match;
  const wall = [year, month, day, hour, minute, seconds].map(Number) as [number, number, number, number, number, number];
  const milliseconds = Number(fraction.padEnd(3, "0"));
  const asUtc = Date.UTC(wall[0], wall[1] - 1, wall[2], wall[3], wall[4], wall[5], milliseconds);
  const check = new Date(asUtc);
  if (check.getUTCMonth() !== wall[1] - 1 || check.getUTCDate() !== wall[2] || wall[3] > 23 || wall[4] > 59 || wall[5] > 59) return undefined;
  if (offset) {
    if (offset.toUpperCase() === "Z") return asUtc;
    const sign = offset.startsWith("-") ? -1 : 1;
    const digits = offset.slice(1).replace(":", "");
    return asUtc - sign * (Number(digits.slice(0, 2)) * 60 + Number(digits.slice(2))) * 60_000;
  }
  // Guess with the offset at the wall time read as UTC, then correct once for a DST change between.
  const guess = asUtc - zoneOffset(asUtc, timezone);
  return asUtc - zoneOffset(guess, timezone);
}

/** How far `timezone`'s wall clock is ahead of UTC at `epoch`, in ms. */
function zoneOffset(epoch: number, timezone: string): number {
  const parts = wallClock(epoch, timezone);
  const wallAsUtc = Date.UTC(parts.year, parts.month - 1, parts.day, parts.hour, parts.minute, parts.second);
  return wallAsUtc - Math.floor(epoch / 1000) * 1000;
}

interface WallClock {
  year: number;
  month: number;
  day: number;
  hour: number;
  minute: number;
  second: number;
}

function wallClock(epoch: number, timezone: string): WallClock {
  const format = new Intl.DateTimeFormat("en-US", {
    timeZone: timezone,
    hourCycle: "h23",
    year: "numeric",
    month: "numeric",
    day: "numeric",
    hour: "numeric",
    minute: "numeric",
    second: "numeric",
  });
  const value = (type: Intl.DateTimeFormatPartTypes): number => Number(format.formatToParts(epoch).find((part) => part.type === type)?.value);
  return { year: value("year"), month: value("month"), day: value("day"), hour: value("hour"), minute: value("minute"), second: value("second") };
}

export function isValidTimeZone(timezone: string): boolean {
  try {
    new Intl.DateTimeFormat("en-US", { timeZone: timezone });
    return true;
  } catch {
    return false;
  }
}

/** `2025-06-01 09:00 Asia/Shanghai` (seconds shown when not zero). */
export function formatTime(epoch: number, timezone: string): string {
  const wall = wallClock(epoch, timezone);
  const pad = (value: number) => String(value).padStart(2, "0");
  const seconds = wall.second === 0 ? "" : `:${pad(wall.second)}`;
  return `${wall.year}-${pad(wall.month)}-${pad(wall.day)} ${pad(wall.hour)}:${pad(wall.minute)}${seconds} ${timezone}`;
}

/**
 * "once at …", "every 5 minutes (next at …)", "cron "0 9 * * *" in Asia/Shanghai (next at …)".
 * Times of `at` and `every` jobs are shown in `timezone`; a cron job's in its own.
 */
export function describeSchedule(job: CronJob, now: number, timezone = "UTC"): string {
  const schedule = job.schedule;
  const shownIn = schedule.kind === "cron" ? schedule.timezone : timezone;
  let next: number | undefined;
  try {
    next = nextDueTime(job, now);
  } catch {
    next = undefined;
  }
  const nextText = next === undefined ? "" : ` (next at ${formatTime(next, shownIn)})`;
  switch (schedule.kind) {
    case "at":
      return `once at ${formatTime(schedule.at, shownIn)}`;
    case "every":
      return `every ${describeInterval(schedule.seconds)}${nextText}`;
    case "cron":
      return `cron "${schedule.expression}" in ${schedule.timezone}${nextText}`;
  }
}

function describeInterval(seconds: number): string {
  const units: Array<[number, string]> = [
    [86_400, "day"],
    [3_600, "hour"],
    [60, "minute"],
  ];
  for (const [size, name] of units) {
    if (seconds % size === 0) {
      const count = seconds / size;
      return count === 1 ? name : `${count} ${name}s`;
    }
  }
  return seconds === 1 ? "second" : `${seconds} seconds`;
}

function excerpt(text: string): string {
  const line = text.replace(/\s+/g, " ");
  return line.length <= 80 ? line : `${line.slice(0, 79)}…`;
}
