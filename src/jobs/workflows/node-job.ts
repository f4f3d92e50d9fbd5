/**
 * A team run's node as a job on the `workflows` queue: the queue's and the job's names, the job's
 * data, and its id (one job per node of a run, so queueing it twice is a no-op).
 */
import { z } from "zod";

/** The BullMQ queue name of workflow node jobs. */
export const WORKFLOW_QUEUE = "workflows";
/** The job name of one node's run. */
export const WORKFLOW_JOB = "node";

export const WorkflowJobDataSchema = z.object({
  runId: z.string().min(1),
  nodeId: z.string().min(1),
  /** Queued again by `recover`: it may find its node still "running". */
  recovered: z.boolean().optional(),
});
export type WorkflowJobData = z.infer<typeof WorkflowJobDataSchema>;

/** A node's job id: one job per node of a run, so queueing it twice is a no-op. */
export function nodeJobId(runId: string, nodeId: string): string {
  return `${runId}.${nodeId}`;
}
