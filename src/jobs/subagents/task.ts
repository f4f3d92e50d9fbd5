/**
 * The subagent task record lives in the store layer (../../store/task-record.ts), which keeps it;
 * jobs is above the store, so the subagent modules take it from there.
 */
export {
  FINISHED_STATUSES,
  SubagentTaskSchema,
  TaskStatusSchema,
  TaskToolCallSchema,
  type SubagentTask,
  type TaskStats,
  type TaskStatus,
  type TaskToolCall,
} from "../../store/task-record.js";
