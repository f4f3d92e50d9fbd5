/**
 * The fake model of the group-chat end-to-end tests (Discord, Feishu, Telegram), on the fake OpenAI
 * server, and what the tests read back from the requests it got:
 *
 * - "remember that I am vegetarian": calls the memory tool (person scope) with a note holding
 *   `personFact`, then answers "saved";
 * - "hold": answers only once the test opens the `hold` gate (a turn that keeps the chat busy
 *   while a burst arrives);
 * - a background event: relays it whole, HTML comment included, as a careless model would;
 * - team agents `Reader` and `Writer`: each answers once the test opens its gate;
 * - anything else: `echo: <the turn's user text>`.
 */
import type { FakeOpenAIStep } from "./fake-openai-server.js";

export interface Gate {
  promise: Promise<void>;
  open(): void;
}

function gate(): Gate {
  let open!: () => void;
  const promise = new Promise<void>((resolve) => (open = resolve));
  return { promise, open };
}

type Message = { role: string; content: unknown };

export const textOf = (message: Message | undefined): string => {
  if (!message) return "";
  if (typeof message.content === "string") return message.content;
  return ((message.content ?? []) as Array<{ type: string; text?: string }>).map((part) => part.text ?? "").join(" ");
};

/** The system prompt of a request. */
export const systemOf = (body: Record<string, unknown>): string => textOf((body.messages as Message[])[0]);

/** Every user message of a request, history first, the turn's own last. */
export const userTexts = (body: Record<string, unknown>): string[] => (body.messages as Message[]).filter((message) => message.role === "user").map(textOf);

export function createGroupChatModel(personFact: string) {
  const gates = new Map<string, Gate>();
  const gateOf = (name: string) => {
    let found = gates.get(name);
    if (!found) gates.set(name, (found = gate()));
    return found;
  };

  function script(body: Record<string, unknown>): FakeOpenAIStep {
    const messages = body.messages as Message[];
    const system = textOf(messages[0]);
    const role = /^You are (.+?), one agent/m.exec(system)?.[1];
    if (role === "Reader" || role === "Writer") return { text: `${role} wrote their part`, until: gateOf(role).promise };
    const last = messages.at(-1)!;
    if (last.role === "tool") return { text: "saved" };
    const text = textOf([...messages].reverse().find((message) => message.role === "user"));
    if (text.startsWith("[Background event]")) return { text: `Relayed: ${text}` };
    if (text.includes("remember that I am vegetarian")) {
      return { toolCalls: [{ name: "memory", arguments: JSON.stringify({ action: "append", scope: "person", content: personFact }) }] };
    }
    if (/\bhold\b/.test(text)) return { text: "held", until: gateOf("hold").promise };
    return { text: `echo: ${text}` };
  }

  return {
    script,
    /** Lets the model's answer behind `name` (hold, Reader, Writer) go. */
    open: (name: string) => gateOf(name).open(),
    /** Opens every gate (the end of a file: no held response outlives it). */
    openAll: () => {
      for (const name of ["hold", "Reader", "Writer"]) gateOf(name).open();
    },
  };
}

/** A team of two agents one after the other, each held by its gate: the status message shows every state. */
export const crewTeam = {
  mode: "pipeline",
  description: "reads, then writes",
  agents: [
    { id: "reader", role: "Reader", task: "read the plan" },
    { id: "writer", role: "Writer", task: "write the review" },
  ],
};
