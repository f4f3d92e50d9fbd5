/**
 * Usage: the usage report (calls, tokens and cost by person, chat, team run, channel or model over
 * today, this week or this month) and, for a person or chat typed in, the budgets that apply to
 * them with what is used, what calls in flight hold and when each renews.
 */
import { useState } from "preact/hooks";
import { api } from "../api";
import { time } from "../format";
import { usePoll } from "../hooks";
import type { BudgetStatusList, UsageReport } from "../types";

const DIMENSIONS = [
  ["person", "Person"],
  ["chat", "Chat"],
  ["team", "Team run"],
  ["channel", "Channel"],
  ["model", "Model"],
] as const;
const PERIODS = [
  ["day", "Today"],
  ["week", "This week"],
  ["month", "This month"],
] as const;

const tokens = (value: number) => value.toLocaleString("en-US");

export function UsageView() {
  const [by, setBy] = useState<string>("person");
  const [period, setPeriod] = useState<string>("day");
  const [person, setPerson] = useState("");
  const [chat, setChat] = useState("");
  const report = usePoll((signal) => api<UsageReport>(`/api/usage?by=${by}&period=${period}`, { signal }), 5_000, [by, period]);
  const query = new URLSearchParams({ ...(person.trim() ? { person: person.trim() } : {}), ...(chat.trim() ? { chat: chat.trim() } : {}) }).toString();
  const budgets = usePoll((signal) => api<BudgetStatusList>(`/api/usage/budgets${query ? `?${query}` : ""}`, { signal }), 5_000, [query]);
  const data = report.data;
  return (
    <section aria-labelledby="usage-title">
      <div class="view-head">
        <h1 id="usage-title">Usage</h1>
        <label>
          By{" "}
          <select value={by} aria-label="Group by" onChange={(event) => setBy(event.currentTarget.value)}>
            {DIMENSIONS.map(([value, label]) => (
              <option key={value} value={value}>
                {label}
              </option>
            ))}
          </select>
        </label>
        <label>
          Period{" "}
          <select value={period} aria-label="Period" onChange={(event) => setPeriod(event.currentTarget.value)}>
            {PERIODS.map(([value, label]) => (
              <option key={value} value={value}>
                {label}
              </option>
            ))}
          </select>
        </label>
      </div>
      {report.error && <p class="field-error">Could not read the usage report: {report.error}</p>}
      {data && (
        <table class="table" data-usage-by={data.by}>
          <caption>
            {data.days.length === 1 ? data.days[0] : `${data.days[0]} to ${data.days.at(-1)}`} ({data.timeZone})
          </caption>
          <thead>
            <tr>
              <th scope="col">{DIMENSIONS.find(([value]) => value === data.by)?.[1]}</th>
              <th scope="col">Calls</th>
              <th scope="col">Input</th>
              <th scope="col">Cached</th>
              <th scope="col">Output</th>
              <th scope="col">Tokens</th>
              <th scope="col">Cost ({data.currency})</th>
            </tr>
          </thead>
          <tbody>
            {data.rows.map((row) => (
              <tr key={row.key} data-key={row.key}>
                <th scope="row">{row.key}</th>
                <td>{row.calls}</td>
                <td>{tokens(row.inputTokens)}</td>
                <td>{tokens(row.cachedInputTokens)}</td>
                <td>{tokens(row.outputTokens)}</td>
                <td data-tokens={row.tokens}>{tokens(row.tokens)}</td>
                <td>
                  {row.cost.toFixed(4)}
                  {row.unpricedCalls > 0 && <span class="hint"> +{row.unpricedCalls} unpriced</span>}
                </td>
              </tr>
            ))}
            {data.rows.length === 0 && (
              <tr>
                <td colSpan={7}>No model calls in this period.</td>
              </tr>
            )}
          </tbody>
        </table>
      )}
      <section class="card" aria-labelledby="budgets-title">
        <h2 id="budgets-title">Budgets</h2>
        <div class="view-head">
          <label>
            Person <input value={person} placeholder="telegram:123456" onInput={(event) => setPerson(event.currentTarget.value)} />
          </label>
          <label>
            Chat <input value={chat} placeholder="telegram:-100123" onInput={(event) => setChat(event.currentTarget.value)} />
          </label>
        </div>
        {budgets.error && <p class="field-error">{budgets.error}</p>}
        {budgets.data && (
          <ul class="plain-list">
            {budgets.data.budgets.map((budget) => (
              <li key={`${budget.kind}:${budget.subject}`} data-budget={budget.kind}>
                <meter min={0} max={budget.limit} value={Math.min(budget.used, budget.limit)} aria-label={`${budget.kind} budget used`} />{" "}
                <strong>{budget.kind === "deployment" ? "Deployment" : `${budget.kind} ${budget.subject}`}</strong>:{" "}
                {budget.unit === "tokens" ? `${tokens(budget.used)} of ${tokens(budget.limit)} tokens` : `${budgets.data!.currency} ${budget.used.toFixed(4)} of ${budget.limit.toFixed(2)}`}
                {budget.held > 0 && <span class="hint"> ({budget.unit === "tokens" ? tokens(budget.held) : budget.held.toFixed(4)} held by calls in flight)</span>}
                {budget.period && <span class="hint"> per {budget.period}</span>}
                {budget.resetsAt && <span class="hint">, renews {time(budget.resetsAt)}</span>}
              </li>
            ))}
            {budgets.data.budgets.length === 0 && <li>No budget applies{query ? "" : " to the whole deployment; type a person or chat"}.</li>}
          </ul>
        )}
      </section>
    </section>
  );
}
