/**
 * A picture of a team's dependencies: each agent a box, placed in the column after the agents it
 * depends on, an arrow from each dependency. Shown in the editor as the team is edited and on a
 * run with each agent's status. A cycle (which the API refuses) still draws, without looping.
 */
import type { TeamAgent } from "../types";

const BOX_WIDTH = 150;
const BOX_HEIGHT = 46;
const COLUMN_GAP = 60;
const ROW_GAP = 18;

type GraphAgent = Pick<TeamAgent, "id" | "role" | "dependsOn">;

export function TeamGraph(props: { agents: GraphAgent[]; statuses?: Record<string, string>; label?: string }) {
  const agents = props.agents.filter((agent) => agent.id.trim() !== "");
  if (agents.length === 0) return null;
  const ids = new Set(agents.map((agent) => agent.id));
  const levels = levelsOf(agents);
  const columns: GraphAgent[][] = [];
  for (const agent of agents) (columns[levels.get(agent.id) ?? 0] ??= []).push(agent);
  const position = new Map<string, { x: number; y: number }>();
  columns.forEach((column, level) =>
    column.forEach((agent, row) => position.set(agent.id, { x: 10 + level * (BOX_WIDTH + COLUMN_GAP), y: 10 + row * (BOX_HEIGHT + ROW_GAP) })),
  );
  const width = 20 + columns.length * BOX_WIDTH + (columns.length - 1) * COLUMN_GAP;
  const height = 20 + Math.max(...columns.map((column) => column.length)) * (BOX_HEIGHT + ROW_GAP) - ROW_GAP;
  const description = agents.map((agent) => (agent.dependsOn.length ? `${agent.id} after ${agent.dependsOn.join(", ")}` : `${agent.id} first`)).join("; ");

  return (
    <figure class="team-graph">
      <svg viewBox={`0 0 ${width} ${height}`} width={width} height={height} role="img" aria-label={`${props.label ?? "Dependencies"}: ${description}`}>
        <defs>
          <marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse">
            <path d="M 0 0 L 10 5 L 0 10 z" class="arrow-head" />
          </marker>
        </defs>
        {agents.flatMap((agent) =>
          agent.dependsOn
            .filter((dependency) => ids.has(dependency))
            .map((dependency) => {
              const from = position.get(dependency)!;
              const to = position.get(agent.id)!;
              return (
                <line
                  key={`${dependency}->${agent.id}`}
                  class="edge"
                  x1={from.x + BOX_WIDTH}
                  y1={from.y + BOX_HEIGHT / 2}
                  x2={to.x - 2}
                  y2={to.y + BOX_HEIGHT / 2}
                  marker-end="url(#arrow)"
                />
              );
            }),
        )}
        {agents.map((agent) => {
          const at = position.get(agent.id)!;
          const status = props.statuses?.[agent.id];
          return (
            <g key={agent.id} class="graph-node" data-status={status} transform={`translate(${at.x} ${at.y})`}>
              <rect width={BOX_WIDTH} height={BOX_HEIGHT} rx="6" />
              <text x="8" y="18" class="graph-id">
                {clip(agent.id, 20)}
              </text>
              <text x="8" y="36" class="graph-role">
                {clip(status ? `${status} · ${agent.role}` : agent.role, 24)}
              </text>
            </g>
          );
        })}
      </svg>
    </figure>
  );
}

/** 0 for an agent that depends on none, else one more than its deepest dependency. */
function levelsOf(agents: GraphAgent[]): Map<string, number> {
  const byId = new Map(agents.map((agent) => [agent.id, agent]));
  const levels = new Map<string, number>();
  const visiting = new Set<string>();
  const level = (id: string): number => {
    const known = levels.get(id);
    if (known !== undefined) return known;
    if (visiting.has(id)) return 0; // a cycle: draw it, do not follow it
    visiting.add(id);
    const dependencies = (byId.get(id)?.dependsOn ?? []).filter((dependency) => byId.has(dependency));
    const value = dependencies.length === 0 ? 0 : 1 + Math.max(...dependencies.map(level));
    visiting.delete(id);
    levels.set(id, value);
    return value;
  };
  for (const agent of agents) level(agent.id);
  return levels;
}

function clip(text: string, length: number): string {
  return text.length > length ? `${text.slice(0, length - 1)}…` : text;
}
