/** Operations: readiness, each channel's health, chats waiting and answered, background queues, tasks, processes, dead letters, and the links to metrics and the queue dashboard. */
import { api } from "../api";
import { StatusBadge, time } from "../format";
import { usePoll } from "../hooks";
import type { DeadLetter, Operations } from "../types";
import { ChannelsCard } from "./channels-card";

export function OperationsView() {
  const overview = usePoll((signal) => api<Operations>("/api/operations", { signal }), 3_000);
  const letters = usePoll((signal) => api<DeadLetter[]>("/api/dead-letters?limit=20", { signal }), 10_000);
  const data = overview.data;
  return (
    <section aria-labelledby="operations-title">
      <div class="view-head">
        <h1 id="operations-title">Operations</h1>
        {data && <StatusBadge status={data.ready ? "ready" : "not ready"} />}
        {data?.links.metrics && (
          <a href={data.links.metrics} target="_blank" rel="noopener">
            Metrics (Prometheus)
          </a>
        )}
        {data?.links.queues ? (
          <a href={data.links.queues} target="_blank" rel="noopener">
            Queue dashboard
          </a>
        ) : (
          data && <span class="hint">Queue dashboard: over Redis only</span>
        )}
      </div>
      {overview.error && <p class="field-error">Could not read the overview: {overview.error}</p>}
      {data && <ChannelsCard channels={data.channels} />}
      {data && (
        <div class="columns">
          <section class="card" aria-labelledby="health-title">
            <h2 id="health-title">Health</h2>
            <p>
              {data.kind === "redis" ? "Gateways and workers over Redis" : "One process (in-memory bus, file store)"}
            </p>
            <ul class="plain-list">
              {Object.entries(data.checks).map(([name, check]) => (
                <li key={name}>
                  <StatusBadge status={check.ok ? "ok" : "failing"} /> {name}
                  {check.detail ? `: ${check.detail}` : ""}
                </li>
              ))}
              {Object.keys(data.checks).length === 0 && <li>no checks</li>}
            </ul>
            {data.processes.length > 0 && (
              <>
                <h3>Processes</h3>
                <ul class="plain-list">
                  {data.processes.map((process) => (
                    <li key={`${process.host}-${process.pid}`}>
                      {process.role} {process.host}:{process.pid} <span class="hint">up since {time(process.startedAt)}</span>
                    </li>
                  ))}
                </ul>
              </>
            )}
          </section>
          <section class="card" aria-labelledby="queues-title">
            <h2 id="queues-title">Queues</h2>
            <table class="table">
              <caption class="visually-hidden">Queue depths</caption>
              <thead>
                <tr>
                  <th scope="col">Queue</th>
                  <th scope="col">Waiting</th>
                  <th scope="col">Running</th>
                  <th scope="col">Failed</th>
                </tr>
              </thead>
              <tbody>
                <tr data-queue="chats">
                  <th scope="row">chats (turns)</th>
                  <td>{data.sessions.waiting}</td>
                  <td>{data.sessions.answering}</td>
                  <td>{data.sessions.deadLetters} dead letters</td>
                </tr>
                {data.queues.map((queue) => (
                  <tr key={queue.queue} data-queue={queue.queue}>
                    <th scope="row">{queue.queue}</th>
                    <td>{queue.waiting}</td>
                    <td>{queue.active}</td>
                    <td>{queue.failed}</td>
                  </tr>
                ))}
              </tbody>
            </table>
            <p class="hint">
              Tasks: {data.tasks.running} running, {data.tasks.pending} pending, {data.tasks.completed} completed, {data.tasks.failed} failed, {data.tasks.cancelled} cancelled.
            </p>
          </section>
        </div>
      )}
      <section class="card" aria-labelledby="dead-title">
        <h2 id="dead-title">Dead letters</h2>
        {letters.data?.length === 0 && <p class="empty">None: every turn that was given up on would be here.</p>}
        <ol class="plain-list">
          {letters.data?.map((letter, index) => (
            <li key={`${letter.sessionKey}-${letter.at}-${index}`}>
              <strong>{letter.sessionKey}</strong> <span class="hint">{time(letter.at)}</span>
              <p>{letter.reason}</p>
              <ul>
                {letter.messages.map((message) => (
                  <li key={message.id}>
                    <span class="hint">{message.senderId}:</span> {message.content}
                  </li>
                ))}
              </ul>
            </li>
          ))}
        </ol>
      </section>
    </section>
  );
}
