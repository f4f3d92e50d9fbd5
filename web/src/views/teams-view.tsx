/** Agent teams: the list (the config file's and the API's), and the editor of one or of a new one. */
import { api } from "../api";
import { StatusBadge } from "../format";
import { navigate, usePoll } from "../hooks";
import type { Team } from "../types";
import { TeamEditor } from "./team-editor";

export function TeamsView(props: { id?: string }) {
  if (props.id === "new") return <TeamEditor key="new" />;
  if (props.id) return <TeamLoader key={props.id} id={props.id} />;
  return <TeamList />;
}

function TeamLoader(props: { id: string }) {
  const team = usePoll((signal) => api<Team>(`/api/agent-teams/${encodeURIComponent(props.id)}`, { signal }), 0, [props.id]);
  if (team.error) return <p class="field-error">Could not read the team: {team.error}</p>;
  if (!team.data) return <p class="loading">Loading…</p>;
  return <TeamEditor team={team.data} />;
}

function TeamList() {
  const teams = usePoll((signal) => api<Team[]>("/api/agent-teams", { signal }), 0);
  return (
    <section aria-labelledby="teams-title">
      <div class="view-head">
        <h1 id="teams-title">Teams</h1>
        <button type="button" onClick={() => navigate("teams", "new")}>
          New team
        </button>
      </div>
      {teams.error && <p class="field-error">Could not read the teams: {teams.error}</p>}
      {teams.data?.length === 0 && <p class="empty">No teams yet. Create one, or declare them under <code>teams</code> in the config file.</p>}
      {(teams.data?.length ?? 0) > 0 && (
      <table class="table">
        <caption class="visually-hidden">Agent teams</caption>
        <thead>
          <tr>
            <th scope="col">Name</th>
            <th scope="col">Mode</th>
            <th scope="col">Agents</th>
            <th scope="col">State</th>
            <th scope="col">From</th>
          </tr>
        </thead>
        <tbody>
          {teams.data?.map((team) => (
            <tr key={team.id}>
              <td>
                <a href={`#/teams/${encodeURIComponent(team.id)}`}>{team.name}</a>
                {team.description && <div class="hint">{team.description}</div>}
              </td>
              <td>{team.mode}</td>
              <td>{team.agents.map((agent) => agent.id).join(", ")}</td>
              <td>
                <StatusBadge status={team.enabled ? "enabled" : "disabled"} />
              </td>
              <td>{team.source === "config" ? "config file" : "API"}</td>
            </tr>
          ))}
        </tbody>
      </table>
      )}
    </section>
  );
}
