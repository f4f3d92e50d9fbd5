/**
 * A subagent task: pending → running → completed | failed |
 * cancelled, progress 0-100, result or error, its tool calls and timestamps. The record is the
 * store's (the TaskStore keeps and checks it); the jobs that run subagents use it from here.
 */
import { z } from "zod";

export const TaskStatusSchema = z.enum(["pending", "running", "completed", "failed", "cancelled"]);
export type TaskStatus = z.infer<typeof TaskStatusSchema>;

export const FINISHED_STATUSES: ReadonlySet<TaskStatus> = new Set(["completed", "failed", "cancelled"]);

export const TaskToolCallSchema = z.object({
  name: z.string(),
  success: z.boolean(),
  durationMs: z.number(),
  /** Arguments and result, shortened for storage. */
  arguments: z.string(),
  result: z.string(),
});

export const SubagentTaskSchema = z.object({
  id: z.string(),
  label: z.string(),
  /** What the subagent was asked to do. */
  task: z.string(),
  /** The session (`channel:chat_id`) that spawned it; its result goes back there. */
  sessionKey: z.string(),
  /** `channel:senderId` of the person who asked for it: its model calls count against their budget. */
  person: z.string().optional(),
  /** The agent profile (src/config/agents.ts) of the chat that started it: it runs in that profile's workspace, on its tools. Absent: `default`. */
  profile: z.string().optional(),
  status: TaskStatusSchema,
  progress: z.number().int().min(0).max(100),
  result: z.string().optional(),
  error: z.string().optional(),
  toolCalls: z.array(TaskToolCallSchema),
  createdAt: z.number(),
  startedAt: z.number().optional(),
  completedAt: z.number().optional(),
  /** Runs so far: 2 means it was recovered after its worker died. */
  attempts: z.number().int().min(0),
});
export type SubagentTask = z.infer<typeof SubagentTaskSchema>;
export type TaskToolCall = z.infer<typeof TaskToolCallSchema>;

export interface TaskStats {
  total: number;
  pending: number;
  running: number;
  completed: number;
  failed: number;
  cancelled: number;
}
