/**
 * Where a budget stands in time: the window whose use counts now, the bucket new use goes to, and
 * when the budget renews. Calendar periods begin at midnight in the budget's time zone (weeks on
 * Monday, months on the 1st), daylight-saving changes included. Rolling periods count the last 24
 * hours, 7 days or 30 days in 24 slices each: a slice counts while any part of it is inside the
 * window, so a rolling budget counts up to one slice more than its length, never less.
 */
import type { BudgetPeriod, BudgetReset } from "../config/budgets.js";

const HOUR = 60 * 60 * 1000;
const DAY = 24 * HOUR;
const LENGTHS: Record<BudgetPeriod, number> = { day: DAY, week: 7 * DAY, month: 30 * DAY };
const SLICES = 24;

export interface PeriodSpec {
  period: BudgetPeriod;
  reset: BudgetReset;
  timeZone: string;
}

export interface Window {
  /** Use at or after this counts (ms). */
  from: number;
  /** Where new use is added (ms). */
  bucket: number;
  /** Calendar: when the budget renews. Rolling: undefined (it frees as old use ages out; see {@link freesAt}). */
  resetsAt?: number;
  /** How long the ledger keeps the budget's record after its last use. */
  keepMs: number;
}

export function windowOf(spec: PeriodSpec, now: number): Window {
  if (spec.reset === "rolling") {
    const length = LENGTHS[spec.period];
    const slice = length / SLICES;
    const bucket = Math.floor(now / slice) * slice;
    return { from: bucket - length, bucket, keepMs: length + slice + DAY };
  }
  const from = calendarStart(spec.period, spec.timeZone, now);
  const resetsAt = calendarStart(spec.period, spec.timeZone, nextPeriodProbe(spec.period, spec.timeZone, from));
  return { from, bucket: from, resetsAt, keepMs: resetsAt - from + DAY };
}

/** Rolling: when the oldest use still counted leaves the window. */
export function freesAt(spec: PeriodSpec, oldestBucket: number): number {
  const length = LENGTHS[spec.period];
  return oldestBucket + length + length / SLICES;
}

/** A budget without a period (a team run's): one window for ever, kept a month after its last use. */
export const WHOLE_RUN: Window = { from: 0, bucket: 0, keepMs: 30 * DAY };

/** Per time zone, the day last asked for and when it begins and ends: every model call asks, and the answer changes once a day. */
const knownDays = new Map<string, { day: string; from: number; until: number }>();
const KNOWN_DAYS_KEPT = 64;

/** `YYYY-MM-DD` of `now` in the time zone: the usage report's day. */
export function dayIn(timeZone: string, now: number): string {
  const known = knownDays.get(timeZone);
  if (known && now >= known.from && now < known.until) return known.day;
  const { year, month, day } = partsIn(timeZone, now);
  const text = `${year}-${pad(month)}-${pad(day)}`;
  // Date.UTC carries day + 1 into the next month and year.
  const from = localMidnight(timeZone, year, month, day);
  const until = localMidnight(timeZone, year, month, day + 1);
  if (now >= from && now < until) {
    if (!knownDays.has(timeZone) && knownDays.size >= KNOWN_DAYS_KEPT) knownDays.delete(knownDays.keys().next().value!);
    knownDays.set(timeZone, { day: text, from, until });
  }
  return text;
}

/** The usage report's days of the calendar period that holds `now`, up to `now`'s day. */
export function daysOfPeriod(period: BudgetPeriod, timeZone: string, now: number): string[] {
  const start = calendarStart(period, timeZone, now);
  const days: string[] = [];
  for (let probe = start + 12 * HOUR; days.length < 32; probe += DAY) {
    const day = dayIn(timeZone, probe);
    if (days.at(-1) !== day) days.push(day);
    if (day === dayIn(timeZone, now)) break;
  }
  return days;
}

/** `2026-12-05 00:00 UTC`, in the time zone: when a budget renews, as people read it. */
export function formatTime(timeZone: string, at: number): string {
  const { year, month, day, hour, minute } = partsIn(timeZone, at);
  return `${year}-${pad(month)}-${pad(day)} ${pad(hour)}:${pad(minute)} ${timeZone}`;
}

/** The start of the calendar day, week (Monday) or month holding `now`, in the time zone. */
function calendarStart(period: BudgetPeriod, timeZone: string, now: number): number {
  const local = partsIn(timeZone, now);
  let { year, month, day } = local;
  if (period === "month") day = 1;
  if (period === "week") {
    const weekday = new Date(Date.UTC(year, month - 1, day)).getUTCDay();
    const back = (weekday + 6) % 7;
    const monday = new Date(Date.UTC(year, month - 1, day - back));
    [year, month, day] = [monday.getUTCFullYear(), monday.getUTCMonth() + 1, monday.getUTCDate()];
  }
  return localMidnight(timeZone, year, month, day);
}

/** A time inside the next period (the next start is the calendar start of it). */
function nextPeriodProbe(period: BudgetPeriod, timeZone: string, start: number): number {
  if (period === "month") {
    const { year, month } = partsIn(timeZone, start + 12 * HOUR);
    return localMidnight(timeZone, month === 12 ? year + 1 : year, month === 12 ? 1 : month + 1, 1) + 12 * HOUR;
  }
  return start + (period === "week" ? 7 * DAY : DAY) + 12 * HOUR;
}

/** UTC ms of 00:00 local time on that date (the first instant of the day where midnight is skipped). */
function localMidnight(timeZone: string, year: number, month: number, day: number): number {
  const wanted = Date.UTC(year, month - 1, day);
  let guess = wanted;
  // The zone's offset at the guess moves the guess; twice settles it across a DST change.
  for (let round = 0; round < 3; round++) guess = wanted - offsetAt(timeZone, guess);
  return guess;
}

function offsetAt(timeZone: string, at: number): number {
  const parts = partsIn(timeZone, at);
  return Date.UTC(parts.year, parts.month - 1, parts.day, parts.hour, parts.minute, parts.second) - Math.floor(at / 1000) * 1000;
}

const formatters = new Map<string, Intl.DateTimeFormat>();

function partsIn(timeZone: string, at: number): { year: number; month: number; day: number; hour: number; minute: number; second: number } {
  let formatter = formatters.get(timeZone);
  if (!formatter) {
    formatter = new Intl.DateTimeFormat("en-US", { timeZone, hourCycle: "h23", year: "numeric", month: "numeric", day: "numeric", hour: "numeric", minute: "numeric", second: "numeric" });
    formatters.set(timeZone, formatter);
  }
  const values: Record<string, number> = {};
  for (const part of formatter.formatToParts(at)) if (part.type !== "literal") values[part.type] = Number(part.value);
  return { year: values.year!, month: values.month!, day: values.day!, hour: values.hour!, minute: values.minute!, second: values.second! };
}

function pad(value: number): string {
  return String(value).padStart(2, "0");
}
