/**
 * Subagent tasks: live progress bars (read every second while shown), status, the result as
 * sanitized Markdown, cancel while pending or running, delete once finished.
 */
import { FilterSelect } from "../filter-select";
import { useState } from "preact/hooks";
import { api, errorText } from "../api";
import { StatusBadge, elapsed, time } from "../format";
import { usePoll } from "../hooks";
import { Markdown } from "../markdown";
import type { Task, TaskStats, TaskStatus } from "../types";

const STATUSES: TaskStatus[] = ["pending", "running", "completed", "failed", "cancelled"];

export function TasksView() {
  const [status, setStatus] = useState("");
  const tasks = usePoll((signal) => api<Task[]>(`/api/tasks?status=${status}&limit=100`, { signal }), 1_000, [status]);
  const stats = usePoll((signal) => api<TaskStats>("/api/tasks/stats", { signal }), 2_000);
  const [problem, setProblem] = useState<string | undefined>(undefined);

  const act = async (task: Task, action: "cancel" | "delete") => {
    setProblem(undefined);
    try {
      await api(`/api/tasks/${encodeURIComponent(task.task_id)}${action === "cancel" ? "/cancel" : ""}`, { method: action === "cancel" ? "POST" : "DELETE" });
    } catch (error) {
      setProblem(errorText(error));
    }
    await tasks.refresh();
  };

  return (
    <section aria-labelledby="tasks-title">
      <div class="view-head">
        <h1 id="tasks-title">Tasks</h1>
        {stats.data && (
          <p class="summary">
            {stats.data.running} running · {stats.data.pending} pending · {stats.data.completed} completed · {stats.data.failed} failed · {stats.data.cancelled} cancelled
          </p>
        )}
        <FilterSelect id="task-status" label="Status" value={status} all="any" options={STATUSES} onChange={setStatus} />
      </div>
      {problem && (
        <p class="field-error" role="alert">
          {problem}
        </p>
      )}
      {tasks.error && <p class="field-error">Could not read the tasks: {tasks.error}</p>}
      {tasks.data?.length === 0 && <p class="empty">No tasks{status ? ` ${status}` : ""}. A chat starts one when the agent uses its spawn tool (“do this in the background”).</p>}
      <ul class="cards">
        {tasks.data?.map((task) => (
          <li key={task.task_id} class="card task" data-task={task.task_id} data-status={task.status}>
            <div class="card-head">
              <h2>{task.label}</h2>
              <StatusBadge status={task.status} />
            </div>
            <div class="progress" role="progressbar" aria-label={`Progress of ${task.label}`} aria-valuemin={0} aria-valuemax={100} aria-valuenow={task.progress}>
              <div class="progress-fill" style={{ width: `${task.progress}%` }} />
              <span class="progress-text">{task.progress} %</span>
            </div>
            <p class="task-message">{task.message}</p>
            <p class="hint">
              {task.session_id} · created {time(task.created_at)} · {task.completed_at ? `took ${elapsed(task.started_at, task.completed_at)}` : task.started_at ? `running for ${elapsed(task.started_at, null)}` : "waiting"}
            </p>
            {task.result && (
              <details open>
                <summary>Result</summary>
                <Markdown text={task.result} />
              </details>
            )}
            {task.error && <p class="field-error">{task.error}</p>}
            <div class="actions">
              {(task.status === "pending" || task.status === "running") && (
                <button type="button" class="secondary" onClick={() => void act(task, "cancel")}>
                  Cancel {task.label}
                </button>
              )}
              {task.status !== "pending" && task.status !== "running" && (
                <button type="button" class="link-button" onClick={() => void act(task, "delete")}>
                  Delete
                </button>
              )}
            </div>
          </li>
        ))}
      </ul>
    </section>
  );
}
