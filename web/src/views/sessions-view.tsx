/** Sessions: the chats the deployment knows, by channel (an account is a channel of its own) and agent profile; one chat's history, long-term memory and tool calls. */
import { FilterSelect } from "../filter-select";
import { useState } from "preact/hooks";
import { api } from "../api";
import { duration, time } from "../format";
import { usePoll } from "../hooks";
import { Markdown } from "../markdown";
import type { Memory, SessionDetail, SessionSummary, ToolHistoryEntry } from "../types";

export function SessionsView(props: { sessionKey?: string }) {
  if (props.sessionKey) return <Session key={props.sessionKey} sessionKey={props.sessionKey} />;
  return <SessionList />;
}

function SessionList() {
  const [channel, setChannel] = useState("");
  const [profile, setProfile] = useState("");
  const sessions = usePoll((signal) => api<SessionSummary[]>("/api/sessions?limit=500", { signal }), 5_000);
  const channels = [...new Set(sessions.data?.map((session) => session.channel) ?? [])].sort();
  const profiles = [...new Set(sessions.data?.map((session) => session.profile) ?? [])].sort();
  const shown = sessions.data?.filter((session) => (channel === "" || session.channel === channel) && (profile === "" || session.profile === profile)) ?? [];
  const groups = new Map<string, SessionSummary[]>();
  for (const session of shown) groups.set(session.channel, [...(groups.get(session.channel) ?? []), session]);

  return (
    <section aria-labelledby="sessions-title">
      <div class="view-head">
        <h1 id="sessions-title">Sessions</h1>
        <FilterSelect id="session-channel" label="Channel" value={channel} all="all" options={channels} onChange={setChannel} />
        {profiles.length > 1 && <FilterSelect id="session-profile" label="Agent" value={profile} all="all" options={profiles} onChange={setProfile} />}
      </div>
      {sessions.error && <p class="field-error">Could not read the sessions: {sessions.error}</p>}
      {sessions.data && shown.length === 0 && <p class="empty">No sessions yet.</p>}
      {[...groups].map(([name, list]) => (
        <section key={name} class="card" aria-label={`${name} chats`}>
          <h2>
            {name} <span class="hint">({list.length})</span>
          </h2>
          <ul class="plain-list">
            {list.map((session) => (
              <li key={session.key} data-profile={session.profile}>
                <a href={`#/sessions/${encodeURIComponent(session.key)}`}>{session.chatId}</a> <span class="hint">agent {session.profile} · last active {time(session.updatedAt)}{session.generation > 0 ? ` · started over ${session.generation}×` : ""}</span>
              </li>
            ))}
          </ul>
        </section>
      ))}
    </section>
  );
}

function Session(props: { sessionKey: string }) {
  const path = encodeURIComponent(props.sessionKey);
  const session = usePoll((signal) => api<SessionDetail>(`/api/sessions/${path}`, { signal }), 5_000, [path]);
  const memory = usePoll((signal) => api<Memory>(`/api/sessions/${path}/memory`, { signal }), 5_000, [path]);
  const tools = usePoll((signal) => api<ToolHistoryEntry[]>(`/api/sessions/${path}/tool-history?limit=50`, { signal }), 5_000, [path]);
  return (
    <section aria-labelledby="session-title">
      <div class="view-head">
        <h1 id="session-title">{props.sessionKey}</h1>
        {session.data?.channel === "web" && <a href={`#/chat/${encodeURIComponent(session.data.chatId)}`}>Open in the chat</a>}
        <a href="#/sessions">All sessions</a>
      </div>
      {session.error && <p class="field-error">Could not read the session: {session.error}</p>}
      <div class="columns">
        <section class="card" aria-labelledby="history-title">
          <h2 id="history-title">History</h2>
          {session.data?.history.length === 0 && <p class="empty">Nothing in this session yet{(session.data?.generation ?? 0) > 0 ? " (it started over; older turns are archived)" : ""}.</p>}
          <ol class="history">
            {session.data?.history.map((entry, index) => (
              <li key={index} class={`message ${entry.role}`}>
                <p class="hint">
                  {entry.role === "assistant" ? `assistant${entry.model ? ` (${entry.model})` : ""}` : entry.role === "event" ? "background event" : "user"} · {time(entry.at)}
                </p>
                {entry.role === "assistant" ? <Markdown text={withoutMarkers(entry.content)} /> : <p class="plain">{withoutMarkers(entry.content)}</p>}
              </li>
            ))}
          </ol>
        </section>
        <div>
          <section class="card" aria-labelledby="memory-title">
            <h2 id="memory-title">Memory</h2>
            {memory.data && (
              <>
                <p class="hint">
                  {memory.data.scope === "global" ? "global memory (shared by every chat)" : "this chat's memory"} · <code>{memory.data.location}</code>
                </p>
                {memory.data.content.trim() === "" ? <p class="empty">Empty.</p> : <Markdown text={memory.data.content} />}
              </>
            )}
          </section>
          {(memory.data?.people?.length ?? 0) > 0 && (
            <section class="card" aria-labelledby="people-title">
              <h2 id="people-title">Person memory</h2>
              <p class="hint">What each person who spoke here told about themselves; it follows them into every chat and is shown to the model only when they speak.</p>
              {memory.data?.people?.map((person) => (
                <section key={person.person} aria-label={`person memory of ${person.person}`}>
                  <h3>
                    {person.person} <span class="hint">· <code>{person.location}</code></span>
                  </h3>
                  {person.content.trim() === "" ? <p class="empty">Empty.</p> : <Markdown text={person.content} />}
                </section>
              ))}
            </section>
          )}
          <section class="card" aria-labelledby="tools-title">
            <h2 id="tools-title">Tool calls</h2>
            {tools.data?.length === 0 && <p class="empty">None.</p>}
            <ul class="plain-list">
              {tools.data?.map((entry, index) => (
                <li key={index}>
                  <code>
                    {entry.tool}({argumentsText(entry.arguments)})
                  </code>{" "}
                  <span class="hint">
                    {entry.success ? "ok" : "failed"} · {duration(entry.duration_ms)} · {time(entry.at)}
                  </span>
                </li>
              ))}
            </ul>
          </section>
        </div>
      </div>
    </section>
  );
}

function argumentsText(value: unknown): string {
  const text = typeof value === "string" ? value : JSON.stringify(value);
  return text.length > 80 ? `${text.slice(0, 79)}…` : text;
}

/** Internal markers (`<!-- … -->`, a team run's execution metadata) are for the model, not for people. */
function withoutMarkers(text: string): string {
  return text.replace(/<!--[\s\S]*?(?:-->|$)/g, "").trimEnd();
}
