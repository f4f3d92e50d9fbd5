/** The shapes the console reads from the API (src/api/*-routes.ts and channels/web), as far as it uses them. */

/** What a chat's WebSocket sends (channels/web/web-adapter.ts, WebEvent). */
export type WebEvent =
  | { type: "draft"; replyId: string; text: string }
  | { type: "notice"; id: string; content: string; workflow?: WorkflowNotice; seq?: string; reasoning?: true }
  | { type: "message"; id: string; content: string; answers: string[]; part?: number; parts?: number; seq?: string };

export interface WorkflowNotice {
  runId: string;
  team: string;
  /** Absent on the run's own notices (`run-started`, `run-completed`, ...). */
  nodeId?: string;
  event: string;
  status: string;
  tool?: string;
  text?: string;
}

export type TaskStatus = "pending" | "running" | "completed" | "failed" | "cancelled";

export interface Task {
  task_id: string;
  label: string;
  message: string;
  session_id: string;
  status: TaskStatus;
  progress: number;
  result: string | null;
  error: string | null;
  created_at: string;
  started_at: string | null;
  completed_at: string | null;
}

export type TaskStats = Record<TaskStatus | "total", number>;

export type TeamMode = "pipeline" | "graph" | "council";

export interface TeamAgent {
  id: string;
  role: string;
  systemPrompt?: string;
  task?: string;
  perspective?: string;
  dependsOn: string[];
  model?: string;
}

export interface Team {
  id: string;
  name: string;
  description: string;
  mode: TeamMode;
  enabled: boolean;
  crossReview: boolean;
  maxIterations: number;
  nodeTimeoutSeconds: number;
  maxParallel?: number;
  agents: TeamAgent[];
  source: "config" | "api";
}

export type RunStatus = "pending" | "running" | "completed" | "failed" | "cancelled";

export interface RunNode {
  id: string;
  agentId: string;
  kind: string;
  role: string;
  status: string;
  input?: string | null;
  output?: string | null;
  error: string | null;
  attempts: number;
  queuedAt: string | null;
  startedAt: string | null;
  completedAt: string | null;
}

export interface Run {
  id: string;
  teamId: string;
  teamName: string;
  mode: TeamMode;
  goal: string;
  chat: string | null;
  /** What started it; null for runs kept from before it was recorded. */
  origin: "mention" | "tool" | "api" | "openai" | null;
  status: RunStatus;
  result: string | null;
  error: string | null;
  createdAt: string | null;
  completedAt: string | null;
  durationMs: number | null;
  nodes: RunNode[];
  team?: { agents: TeamAgent[] };
}

export interface SessionSummary {
  key: string;
  /** The bus channel: the platform, and `.<account>` for an account besides `default`. */
  channel: string;
  account: string;
  /** The agent profile the routing rules give the chat. */
  profile: string;
  chatId: string;
  createdAt: string;
  updatedAt: string;
  generation: number;
}

export interface HistoryEntry {
  /** `event`: a background event (a task or team finishing, a scheduled message) the agent answered. */
  role: "user" | "assistant" | "event";
  content: string;
  at: string;
  model?: string;
}

export interface SessionDetail extends SessionSummary {
  history: HistoryEntry[];
}

export interface Memory {
  key: string;
  scope: "chat" | "global";
  location: string;
  content: string;
  /** The person memory of everyone who spoke in the chat. */
  people?: Array<{ person: string; location: string; content: string }>;
}

export interface ToolHistoryEntry {
  at: string;
  tool: string;
  /** The call's arguments as the model sent them (an object, or text it could not parse). */
  arguments: unknown;
  result: string;
  duration_ms: number;
  success: boolean;
}

/** A channel's health (src/gateway/channel-health.ts, ChannelHealthJson). */
export interface ChannelHealth {
  name: string;
  state: "starting" | "up" | "degraded" | "down" | "standby";
  since: string;
  lastError?: { message: string; kind: string; at: string };
  retryAt?: string;
  messagesIn: number;
  messagesOut: number;
}

export interface Operations {
  kind: "memory" | "redis";
  ready: boolean;
  checks: Record<string, { ok: boolean; detail?: string }>;
  /** Each channel this process runs (a worker runs none). */
  channels: ChannelHealth[];
  sessions: { waiting: number; answering: number; deadLetters: number };
  queues: Array<{ queue: string; waiting: number; active: number; failed: number }>;
  tasks: TaskStats;
  processes: Array<{ role: string; host: string; pid: number; startedAt: string; seenAt: string }>;
  links: { metrics: string | null; queues: string | null };
}

export interface DeadLetter {
  sessionKey: string;
  reason: string;
  at: string;
  messages: Array<{ id: string; senderId: string; content: string; receivedAt: string }>;
}

export interface UsageRow {
  key: string;
  calls: number;
  inputTokens: number;
  cachedInputTokens: number;
  outputTokens: number;
  tokens: number;
  cost: number;
  unpricedCalls: number;
}

export interface UsageReport {
  by: string;
  period: string;
  days: string[];
  currency: string;
  timeZone: string;
  rows: UsageRow[];
}

export interface BudgetStatusList {
  currency: string;
  timeZone: string;
  budgets: Array<{ kind: string; subject: string; unit: "tokens" | "money"; used: number; held: number; limit: number; period: string | null; resetsAt: string | null }>;
}
