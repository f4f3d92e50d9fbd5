/**
 * Scheduled messages: the `cron` tool adds them, a Scheduler fires them by posting a `system`
 * message into the target session, which the agent answers in its chat. Two schedulers: BullMQ job
 * schedulers (idempotent across restarts and workers) and an in-process one (embedded mode).
 */
import { z } from "zod";

export const CronScheduleSchema = z.discriminatedUnion("kind", [
  /** Once, at this time (ms since epoch). */
  z.object({ kind: z.literal("at"), at: z.number().int() }),
  /** Every N seconds. */
  z.object({ kind: z.literal("every"), seconds: z.number().int().min(10) }),
  /** A cron expression (5 or 6 fields) in an IANA time zone. */
  z.object({ kind: z.literal("cron"), expression: z.string().min(1), timezone: z.string().default("UTC") }),
]);
export type CronSchedule = z.infer<typeof CronScheduleSchema>;

export const CronJobSchema = z.object({
  id: z.string(),
  /** The session the firing goes to (`channel:chat_id`). */
  sessionKey: z.string(),
  /** What the agent is told when it fires. */
  message: z.string(),
  schedule: CronScheduleSchema,
  createdAt: z.number(),
});
export type CronJob = z.infer<typeof CronJobSchema>;

export interface Scheduler {
  /** Adds or replaces (same id) a job. Idempotent: adding the same job twice schedules it once. */
  add(job: CronJob): Promise<void>;
  remove(id: string): Promise<boolean>;
  list(sessionKey?: string): Promise<CronJob[]>;
  /** Start firing due jobs in this process; `fire` posts the system message. One firing per due time across all processes. */
  start(fire: (job: CronJob, firedAt: number) => Promise<void>): Promise<void>;
  close(): Promise<void>;
}
