/**
 * Team runs: the list, a form to start one, and one run with each agent's live status, output and
 * timing (read every second until it ends). When the run reports to a web chat, its agents' text
 * streams in from that chat's socket as they write.
 */
import { useEffect, useState } from "preact/hooks";
import { api, errorText } from "../api";
import { ChatConnection } from "../chat-connection";
import { StatusBadge, duration, elapsed, time } from "../format";
import { navigate, usePoll } from "../hooks";
import { Markdown } from "../markdown";
import { loadTranscript } from "../transcript";
import type { Run, RunNode, Team } from "../types";
import { TeamGraph } from "./team-graph";

const FINISHED = new Set(["completed", "failed", "cancelled"]);

export function RunsView(props: { id?: string; teamId?: string }) {
  if (props.id === "new") return <StartRun teamId={props.teamId} />;
  if (props.id) return <RunDetail key={props.id} id={props.id} />;
  return <RunList />;
}

function RunList() {
  const runs = usePoll((signal) => api<Run[]>("/api/workflow-runs?limit=50", { signal }), 2_000);
  return (
    <section aria-labelledby="runs-title">
      <div class="view-head">
        <h1 id="runs-title">Runs</h1>
        <button type="button" onClick={() => navigate("runs", "new")}>
          Start a run
        </button>
      </div>
      {runs.error && <p class="field-error">Could not read the runs: {runs.error}</p>}
      {runs.data?.length === 0 && <p class="empty">No team runs yet. Start one here, or with <code>@TeamName goal</code> in a chat.</p>}
      {(runs.data?.length ?? 0) > 0 && (
      <table class="table">
        <caption class="visually-hidden">Team runs, newest first</caption>
        <thead>
          <tr>
            <th scope="col">Run</th>
            <th scope="col">Team</th>
            <th scope="col">Goal</th>
            <th scope="col">Origin</th>
            <th scope="col">Status</th>
            <th scope="col">Agents</th>
            <th scope="col">Started</th>
            <th scope="col">Took</th>
          </tr>
        </thead>
        <tbody>
          {runs.data?.map((run) => (
            <tr key={run.id} data-run={run.id}>
              <td class="run-id">
                <a href={`#/runs/${encodeURIComponent(run.id)}`}>{run.id}</a>
              </td>
              <td>
                <a href={`#/teams/${encodeURIComponent(run.teamId)}`}>{run.teamName}</a>
              </td>
              <td class="goal">{run.goal}</td>
              <td class="origin">
                <Origin run={run} />
              </td>
              <td>
                <StatusBadge status={run.status} />
              </td>
              <td>
                {run.nodes.filter((node) => node.status === "completed").length}/{run.nodes.length} done
              </td>
              <td>{time(run.createdAt)}</td>
              <td>{run.durationMs === null ? elapsed(run.createdAt, null) : duration(run.durationMs)}</td>
            </tr>
          ))}
        </tbody>
      </table>
      )}
    </section>
  );
}

function StartRun(props: { teamId?: string }) {
  const teams = usePoll((signal) => api<Team[]>("/api/agent-teams", { signal }), 0);
  const [team, setTeam] = useState(props.teamId ?? "");
  const [goal, setGoal] = useState("");
  const [chat, setChat] = useState(() => {
    const last = localStorage.getItem("countbot:last-chat");
    return last ? `web:${last}` : "";
  });
  const [error, setError] = useState<string | undefined>(undefined);
  const [busy, setBusy] = useState(false);
  const chosen = team || teams.data?.find((candidate) => candidate.enabled)?.id || "";

  const start = async (event: Event) => {
    event.preventDefault();
    setBusy(true);
    setError(undefined);
    try {
      const run = await api<Run>("/api/workflow-runs", { method: "POST", body: { team: chosen, goal, ...(chat.trim() ? { chat: chat.trim() } : {}) } });
      navigate("runs", run.id);
    } catch (caught) {
      setError(errorText(caught));
    } finally {
      setBusy(false);
    }
  };

  return (
    <form class="card narrow" onSubmit={(event) => void start(event)} aria-labelledby="start-run-title">
      <h1 id="start-run-title">Start a team run</h1>
      {error && (
        <p class="field-error" role="alert">
          {error}
        </p>
      )}
      <label for="run-team">Team</label>
      <select id="run-team" value={chosen} onChange={(event) => setTeam(event.currentTarget.value)} required>
        {teams.data?.map((candidate) => (
          <option key={candidate.id} value={candidate.id} disabled={!candidate.enabled}>
            {candidate.name} ({candidate.mode}
            {candidate.enabled ? "" : ", disabled"})
          </option>
        ))}
      </select>
      <label for="run-goal">Goal</label>
      <textarea id="run-goal" rows={3} value={goal} onInput={(event) => setGoal(event.currentTarget.value)} required />
      <label for="run-chat">Chat that hears the progress and the result (optional)</label>
      <input id="run-chat" value={chat} placeholder="web:my-chat" onInput={(event) => setChat(event.currentTarget.value)} />
      <div class="actions">
        <button type="submit" disabled={busy || !chosen || goal.trim() === ""}>
          {busy ? "Starting…" : "Start"}
        </button>
        <a href="#/runs">Back to the runs</a>
      </div>
    </form>
  );
}

function RunDetail(props: { id: string }) {
  const [finished, setFinished] = useState(false);
  const run = usePoll((signal) => api<Run>(`/api/workflow-runs/${encodeURIComponent(props.id)}`, { signal }), finished ? 0 : 1_000, [props.id, finished]);
  const [live, setLive] = useState<Record<string, string>>({});
  const [listening, setListening] = useState(false);
  const [problem, setProblem] = useState<string | undefined>(undefined);
  const data = run.data;

  useEffect(() => {
    if (data && FINISHED.has(data.status)) setFinished(true);
  }, [data?.status]);

  // The agents' text as they write it comes as node-chunk notices to the run's web chat.
  const chatId = data?.chat?.startsWith("web:") ? data.chat.slice(4) : undefined;
  useEffect(() => {
    if (!chatId || finished) return;
    const connection = new ChatConnection({
      chatId,
      after: loadTranscript(chatId)?.seq,
      onEvent: (event) => {
        if (event.type === "notice" && event.workflow?.runId === props.id && event.workflow.event === "node-chunk" && event.workflow.nodeId && event.workflow.text) {
          const { nodeId, text } = event.workflow;
          setLive((current) => ({ ...current, [nodeId]: text }));
        }
      },
      onStatus: (status) => setListening(status === "open"),
    });
    return () => {
      connection.close();
      setListening(false);
    };
  }, [chatId, finished, props.id]);

  if (run.error && !data) return <p class="field-error">Could not read the run: {run.error}</p>;
  if (!data) return <p class="loading">Loading…</p>;

  const cancel = async () => {
    setProblem(undefined);
    try {
      await api(`/api/workflow-runs/${encodeURIComponent(data.id)}/cancel`, { method: "POST" });
    } catch (caught) {
      setProblem(errorText(caught));
    }
    await run.refresh();
  };

  const statuses = Object.fromEntries(data.nodes.map((node) => [node.id, node.status]));
  return (
    <section aria-labelledby="run-title" data-run={data.id} data-status={data.status} data-live={listening ? "open" : undefined}>
      <div class="view-head">
        <h1 id="run-title">
          {data.teamName}: run {data.id}
        </h1>
        <StatusBadge status={data.status} />
        {!FINISHED.has(data.status) && (
          <button type="button" class="secondary" onClick={() => void cancel()}>
            Cancel the run
          </button>
        )}
      </div>
      {problem && (
        <p class="field-error" role="alert">
          {problem}
        </p>
      )}
      <dl class="facts">
        <dt>Goal</dt>
        <dd>{data.goal}</dd>
        <dt>Mode</dt>
        <dd>{data.mode}</dd>
        <dt>Origin</dt>
        <dd>
          <Origin run={data} />
        </dd>
        <dt>Chat</dt>
        <dd>{data.chat ? <ChatLink chat={data.chat} /> : "none (nothing hears its progress)"}</dd>
        <dt>Started</dt>
        <dd>{time(data.createdAt)}</dd>
        <dt>Took</dt>
        <dd>{data.durationMs === null ? `${elapsed(data.createdAt, null)} so far` : duration(data.durationMs)}</dd>
      </dl>
      {data.mode === "graph" && data.team && <TeamGraph agents={data.team.agents} statuses={statuses} label="Agents and their status" />}
      <ol class="cards nodes">
        {data.nodes.map((node) => (
          <NodeCard key={node.id} node={node} live={live[node.id]} />
        ))}
      </ol>
      {data.result && (
        <section class="card">
          <h2>Result</h2>
          <Markdown text={data.result} />
        </section>
      )}
      {data.error && <p class="field-error">{data.error}</p>}
      <p>
        <a href="#/runs">Back to the runs</a>
      </p>
    </section>
  );
}

/** A chat as a link to its session: history, memory and tool calls. */
function ChatLink(props: { chat: string }) {
  return <a href={`#/sessions/${encodeURIComponent(props.chat)}`}>{props.chat}</a>;
}

/** What started a run, and the chat it came from. */
function Origin(props: { run: Pick<Run, "origin" | "chat"> }) {
  const { origin, chat } = props.run;
  const from = chat ? <ChatLink chat={chat} /> : "a chat";
  switch (origin) {
    case "mention":
      return <>@mention in {from}</>;
    case "tool":
      return <>the agent, in {from}</>;
    case "openai":
      return <>OpenAI-compatible endpoint</>;
    case "api":
      return chat ? <>console or API, reporting to {from}</> : <>console or API</>;
    default:
      return chat ? <>{from}</> : <>console or API</>;
  }
}

function NodeCard(props: { node: RunNode; live?: string }) {
  const { node } = props;
  const running = node.status === "running";
  return (
    <li class="card node" data-node={node.id} data-status={node.status}>
      <div class="card-head">
        <h2>
          {node.role} <span class="hint">({node.id})</span>
        </h2>
        <StatusBadge status={node.status} />
      </div>
      <p class="hint">
        queued {time(node.queuedAt)} · started {time(node.startedAt)} · {node.completedAt ? `took ${elapsed(node.startedAt, node.completedAt)}` : running ? `running for ${elapsed(node.startedAt, null)}` : "not started"}
        {node.attempts > 1 ? ` · attempt ${node.attempts}` : ""}
      </p>
      {node.output ? <Markdown text={node.output} /> : running && props.live ? <Markdown text={props.live} class="streaming" /> : null}
      {node.error && <p class="field-error">{node.error}</p>}
    </li>
  );
}
