/**
 * The editor of a pipeline, graph or council team. The API is the judge: its answer names the bad
 * field (`agents[0].dependsOn: dependency cycle: a → b → a`), and the message is shown at that
 * field, which gets the focus. A graph team's dependencies are drawn as they are edited.
 */
import type { ComponentChildren } from "preact";
import { useEffect, useRef, useState } from "preact/hooks";
import { ApiError, api, errorText } from "../api";
import { navigate } from "../hooks";
import type { Team, TeamMode } from "../types";
import { TeamGraph } from "./team-graph";

interface AgentDraft {
  key: number;
  id: string;
  role: string;
  task: string;
  perspective: string;
  systemPrompt: string;
  model: string;
  dependsOn: string[];
}

interface TeamDraft {
  name: string;
  description: string;
  mode: TeamMode;
  enabled: boolean;
  crossReview: boolean;
  maxIterations: string;
  nodeTimeoutSeconds: string;
  maxParallel: string;
  agents: AgentDraft[];
}

let nextKey = 1;

function blankAgent(index: number): AgentDraft {
  return { key: nextKey++, id: `agent${index + 1}`, role: "", task: "", perspective: "", systemPrompt: "", model: "", dependsOn: [] };
}

function draftOf(team: Team | undefined): TeamDraft {
  if (!team) return { name: "", description: "", mode: "graph", enabled: true, crossReview: false, maxIterations: "10", nodeTimeoutSeconds: "600", maxParallel: "", agents: [blankAgent(0), blankAgent(1)] };
  return {
    name: team.name,
    description: team.description,
    mode: team.mode,
    enabled: team.enabled,
    crossReview: team.crossReview,
    maxIterations: String(team.maxIterations),
    nodeTimeoutSeconds: String(team.nodeTimeoutSeconds),
    maxParallel: team.maxParallel === undefined ? "" : String(team.maxParallel),
    agents: team.agents.map((agent) => ({
      key: nextKey++,
      id: agent.id,
      role: agent.role,
      task: agent.task ?? "",
      perspective: agent.perspective ?? "",
      systemPrompt: agent.systemPrompt ?? "",
      model: agent.model ?? "",
      dependsOn: agent.dependsOn ?? [],
    })),
  };
}

/** The body the API takes: only what the mode uses, blank optional fields left out. */
function bodyOf(draft: TeamDraft) {
  const number = (text: string) => (text.trim() === "" ? undefined : Number(text));
  return {
    name: draft.name,
    description: draft.description,
    mode: draft.mode,
    enabled: draft.enabled,
    ...(draft.mode === "council" ? { crossReview: draft.crossReview } : {}),
    maxIterations: number(draft.maxIterations),
    nodeTimeoutSeconds: number(draft.nodeTimeoutSeconds),
    ...(draft.maxParallel.trim() ? { maxParallel: number(draft.maxParallel) } : {}),
    agents: draft.agents.map((agent) => ({
      id: agent.id,
      role: agent.role,
      ...(draft.mode !== "council" && agent.task.trim() ? { task: agent.task } : {}),
      ...(draft.mode === "council" && agent.perspective.trim() ? { perspective: agent.perspective } : {}),
      ...(agent.systemPrompt.trim() ? { systemPrompt: agent.systemPrompt } : {}),
      ...(agent.model.trim() ? { model: agent.model.trim() } : {}),
      ...(draft.mode === "graph" ? { dependsOn: agent.dependsOn } : {}),
    })),
  };
}

/** `agents.0.dependsOn.1` is shown at `agents.0.dependsOn`; a field shows the errors at or under its path. */
function errorAt(error: { field?: string; message: string } | undefined, path: string): string | undefined {
  if (!error?.field) return undefined;
  if (error.field !== path && !error.field.startsWith(`${path}.`)) return undefined;
  return error.message.replace(/^[^:]+: /, "");
}

const domId = (path: string) => `team-${path.replace(/\./g, "-")}`;

export function TeamEditor(props: { team?: Team }) {
  const { team } = props;
  const readOnly = team?.source === "config";
  const [draft, setDraft] = useState<TeamDraft>(() => draftOf(team));
  const [error, setError] = useState<{ field?: string; message: string } | undefined>(undefined);
  const [saving, setSaving] = useState(false);
  const form = useRef<HTMLFormElement>(null);

  // Keyboard users land on the field that is wrong.
  useEffect(() => {
    if (!error) return;
    const target = error.field ? fieldElement(form.current, error.field) : form.current?.querySelector<HTMLElement>("#team-form-error");
    target?.focus();
  }, [error]);

  const set = (patch: Partial<TeamDraft>) => setDraft((current) => ({ ...current, ...patch }));
  const setAgent = (index: number, patch: Partial<AgentDraft>) =>
    setDraft((current) => ({ ...current, agents: current.agents.map((agent, at) => (at === index ? { ...agent, ...patch } : agent)) }));
  const removeAgent = (index: number) =>
    setDraft((current) => {
      const removed = current.agents[index]!.id;
      return { ...current, agents: current.agents.filter((_, at) => at !== index).map((agent) => ({ ...agent, dependsOn: agent.dependsOn.filter((id) => id !== removed) })) };
    });

  const save = async (event: Event) => {
    event.preventDefault();
    setSaving(true);
    setError(undefined);
    try {
      const saved = team
        ? await api<Team>(`/api/agent-teams/${encodeURIComponent(team.id)}`, { method: "PUT", body: bodyOf(draft) })
        : await api<Team>("/api/agent-teams", { method: "POST", body: bodyOf(draft) });
      navigate("teams", saved.id);
    } catch (caught) {
      setError(caught instanceof ApiError ? { field: caught.field, message: caught.message } : { message: errorText(caught) });
    } finally {
      setSaving(false);
    }
  };

  const remove = async () => {
    if (!team || !confirm(`Delete the team “${team.name}”?`)) return;
    try {
      await api(`/api/agent-teams/${encodeURIComponent(team.id)}`, { method: "DELETE" });
      navigate("teams");
    } catch (caught) {
      setError({ message: errorText(caught) });
    }
  };

  const fieldProblem = (path: string) => errorAt(error, path);
  const topProblem = error && (!error.field || !fieldElement(form.current, error.field)) ? error.message : undefined;

  return (
    <form ref={form} class="team-editor" onSubmit={(event) => void save(event)} aria-labelledby="team-editor-title" noValidate>
      <h1 id="team-editor-title">{team ? `Team ${team.name}` : "New team"}</h1>
      {readOnly && <p class="hint">Declared in the config file (teams["{team.name}"]): change it there. It can still be started from the Runs view.</p>}
      {topProblem && (
        <p id="team-form-error" class="field-error" role="alert" tabIndex={-1}>
          {topProblem}
        </p>
      )}
      <fieldset disabled={readOnly}>
        <legend>The team</legend>
        <div class="grid">
          <Field path="name" label="Name" problem={fieldProblem("name")}>
            <input id={domId("name")} value={draft.name} onInput={(event) => set({ name: event.currentTarget.value })} required {...invalid(fieldProblem("name"), "name")} />
          </Field>
          <Field path="mode" label="Mode" problem={fieldProblem("mode")}>
            <select id={domId("mode")} value={draft.mode} onChange={(event) => set({ mode: event.currentTarget.value as TeamMode })} {...invalid(fieldProblem("mode"), "mode")}>
              <option value="pipeline">pipeline: one after another</option>
              <option value="graph">graph: by dependencies</option>
              <option value="council">council: side by side, then a synthesis</option>
            </select>
          </Field>
          <Field path="description" label="Description" problem={fieldProblem("description")} wide>
            <input id={domId("description")} value={draft.description} onInput={(event) => set({ description: event.currentTarget.value })} {...invalid(fieldProblem("description"), "description")} />
          </Field>
          <Field path="maxIterations" label="Model calls per agent" problem={fieldProblem("maxIterations")}>
            <input id={domId("maxIterations")} type="number" min={1} max={100} value={draft.maxIterations} onInput={(event) => set({ maxIterations: event.currentTarget.value })} {...invalid(fieldProblem("maxIterations"), "maxIterations")} />
          </Field>
          <Field path="nodeTimeoutSeconds" label="Agent timeout (seconds)" problem={fieldProblem("nodeTimeoutSeconds")}>
            <input id={domId("nodeTimeoutSeconds")} type="number" min={1} value={draft.nodeTimeoutSeconds} onInput={(event) => set({ nodeTimeoutSeconds: event.currentTarget.value })} {...invalid(fieldProblem("nodeTimeoutSeconds"), "nodeTimeoutSeconds")} />
          </Field>
          <Field path="maxParallel" label="Agents at once (blank: the default)" problem={fieldProblem("maxParallel")}>
            <input id={domId("maxParallel")} type="number" min={1} value={draft.maxParallel} onInput={(event) => set({ maxParallel: event.currentTarget.value })} {...invalid(fieldProblem("maxParallel"), "maxParallel")} />
          </Field>
        </div>
        <label class="check">
          <input type="checkbox" checked={draft.enabled} onChange={(event) => set({ enabled: event.currentTarget.checked })} /> Enabled
        </label>
        {draft.mode === "council" && (
          <label class="check">
            <input type="checkbox" checked={draft.crossReview} onChange={(event) => set({ crossReview: event.currentTarget.checked })} /> Cross-review round
          </label>
        )}
      </fieldset>

      {draft.mode !== "council" && (
        <section aria-label="Dependencies">
          <h2>{draft.mode === "graph" ? "Dependencies" : "Order"}</h2>
          <TeamGraph agents={draft.mode === "graph" ? draft.agents : draft.agents.map((agent, index) => ({ ...agent, dependsOn: index === 0 ? [] : [draft.agents[index - 1]!.id] }))} />
        </section>
      )}

      <fieldset disabled={readOnly} id={domId("agents")} tabIndex={-1} aria-describedby={fieldProblem("agents") && !error?.field?.startsWith("agents.") ? `${domId("agents")}-error` : undefined}>
        <legend>Agents</legend>
        {fieldProblem("agents") && !error?.field?.startsWith("agents.") && (
          <p id={`${domId("agents")}-error`} class="field-error" role="alert">
            {fieldProblem("agents")}
          </p>
        )}
        <ol class="agents">
          {draft.agents.map((agent, index) => (
            <AgentFields
              key={agent.key}
              index={index}
              agent={agent}
              mode={draft.mode}
              others={draft.agents.filter((_, at) => at !== index).map((other) => other.id)}
              problem={(path) => fieldProblem(`agents.${index}.${path}`)}
              onChange={(patch) => setAgent(index, patch)}
              onRemove={draft.agents.length > 1 ? () => removeAgent(index) : undefined}
            />
          ))}
        </ol>
        <button type="button" class="secondary" onClick={() => set({ agents: [...draft.agents, blankAgent(draft.agents.length)] })}>
          Add an agent
        </button>
      </fieldset>

      <div class="actions">
        {!readOnly && (
          <button type="submit" disabled={saving}>
            {saving ? "Saving…" : team ? "Save" : "Create team"}
          </button>
        )}
        {team && (
          <button type="button" class="secondary" onClick={() => navigate("runs", "new", team.id)}>
            Start a run
          </button>
        )}
        {team && !readOnly && (
          <button type="button" class="link-button danger" onClick={() => void remove()}>
            Delete
          </button>
        )}
        <a href="#/teams">Back to the teams</a>
      </div>
    </form>
  );
}

function AgentFields(props: {
  index: number;
  agent: AgentDraft;
  mode: TeamMode;
  others: string[];
  problem: (path: string) => string | undefined;
  onChange: (patch: Partial<AgentDraft>) => void;
  onRemove?: () => void;
}) {
  const { index, agent, mode, problem, onChange } = props;
  const path = (field: string) => `agents.${index}.${field}`;
  const dependsProblem = problem("dependsOn");
  return (
    <li class="agent card">
      <div class="grid">
        <Field path={path("id")} label={`Agent ${index + 1}: id`} problem={problem("id")}>
          <input id={domId(path("id"))} value={agent.id} onInput={(event) => onChange({ id: event.currentTarget.value })} {...invalid(problem("id"), path("id"))} />
        </Field>
        <Field path={path("role")} label="Role" problem={problem("role")}>
          <input id={domId(path("role"))} value={agent.role} placeholder="e.g. Backend analyst" onInput={(event) => onChange({ role: event.currentTarget.value })} {...invalid(problem("role"), path("role"))} />
        </Field>
        {mode === "council" ? (
          <Field path={path("perspective")} label="Perspective" problem={problem("perspective")} wide>
            <input id={domId(path("perspective"))} value={agent.perspective} onInput={(event) => onChange({ perspective: event.currentTarget.value })} {...invalid(problem("perspective"), path("perspective"))} />
          </Field>
        ) : (
          <Field path={path("task")} label="Task" problem={problem("task")} wide>
            <textarea id={domId(path("task"))} rows={2} value={agent.task} onInput={(event) => onChange({ task: event.currentTarget.value })} {...invalid(problem("task"), path("task"))} />
          </Field>
        )}
        <Field path={path("model")} label="Model (provider/model, optional)" problem={problem("model")}>
          <input id={domId(path("model"))} value={agent.model} onInput={(event) => onChange({ model: event.currentTarget.value })} {...invalid(problem("model"), path("model"))} />
        </Field>
      </div>
      {mode === "graph" && (
        <fieldset class="depends" id={domId(path("dependsOn"))} tabIndex={-1} aria-invalid={dependsProblem ? "true" : undefined} aria-describedby={dependsProblem ? `${domId(path("dependsOn"))}-error` : undefined}>
          <legend>{agent.id || `Agent ${index + 1}`} depends on</legend>
          {props.others.length === 0 && <p class="hint">No other agents yet.</p>}
          {props.others.map((other, position) => (
            <label key={`${other}-${position}`} class="check">
              <input
                type="checkbox"
                checked={agent.dependsOn.includes(other)}
                onChange={(event) => onChange({ dependsOn: event.currentTarget.checked ? [...agent.dependsOn, other] : agent.dependsOn.filter((id) => id !== other) })}
              />{" "}
              {other || "(no id yet)"}
            </label>
          ))}
          {dependsProblem && (
            <p id={`${domId(path("dependsOn"))}-error`} class="field-error" role="alert" data-field={path("dependsOn")}>
              {dependsProblem}
            </p>
          )}
        </fieldset>
      )}
      {props.onRemove && (
        <button type="button" class="link-button danger" onClick={props.onRemove}>
          Remove agent {agent.id || index + 1}
        </button>
      )}
    </li>
  );
}

function Field(props: { path: string; label: string; problem?: string; wide?: boolean; children: ComponentChildren }) {
  return (
    <div class={`field${props.wide ? " wide" : ""}`}>
      <label for={domId(props.path)}>{props.label}</label>
      {props.children}
      {props.problem && (
        <p id={`${domId(props.path)}-error`} class="field-error" role="alert" data-field={props.path}>
          {props.problem}
        </p>
      )}
    </div>
  );
}

function invalid(problem: string | undefined, path: string) {
  return problem ? { "aria-invalid": "true" as const, "aria-describedby": `${domId(path)}-error` } : {};
}

/** The control for `path` (or the nearest one above it: `agents.0.dependsOn.1` → the dependsOn group). */
function fieldElement(form: HTMLFormElement | null, path: string): HTMLElement | null {
  if (!form) return null;
  for (let parts = path.split("."); parts.length > 0; parts = parts.slice(0, -1)) {
    const element = form.querySelector<HTMLElement>(`#${CSS.escape(domId(parts.join(".")))}`);
    if (element) return element;
  }
  return null;
}
