/**
 * Who speaks in a turn, and how the model is told. In a multi-person chat every message reaches
 * the model as `[<display name> (<channel>:<sender id>)] <text>`, in the current turn and (since the
 * history keeps what the model was given) in every later one. The label is built only from what
 * the gateway put on the message (InboundMessage.group and senderId, the platform's own fields);
 * text that looks like a label inside a message is rewritten so it cannot pass for one, and a
 * display name loses the characters a label is made of. Private chats stay unlabelled.
 */
import { type InboundMessage, SYSTEM_CHANNEL } from "../bus/message.js";

/** A person speaking in this turn: their id (`discord:123`) and the display name the platform gave. */
export interface Speaker {
  id: string;
  name?: string;
}

/** What the system prompt says of a multi-person chat; the same for every turn of one chat. */
export interface GroupSetting {
  /** The platform (the channel's name: `discord`, `feishu`, `telegram`). */
  platform: string;
  chatType: "group" | "thread";
  /** The bot's handle there, without `@`, when known. */
  botHandle?: string;
  addressing: "mention" | "all";
}

const MAX_NAME_CHARS = 64;

/** Text shaped like a label: `[Name (channel:id)]` or `[channel:id]`, anywhere in a message. */
const LABEL_SHAPE = /\[\s*([^[\]\n]{0,200}?)\s*\(\s*([\w-]+\s*:\s*[^()[\]\n]{1,200}?)\s*\)\s*\]|\[\s*([\w-]+\s*:\s*[^()[\]\s]{1,200})\s*\]/g;

export function speakerIdOf(message: Pick<InboundMessage, "channel" | "senderId">): string {
  return `${message.channel}:${message.senderId}`;
}

/** The people who spoke in these messages, each once, in order of first message; background events are nobody. */
export function speakersOf(messages: InboundMessage[]): Speaker[] {
  const speakers = new Map<string, Speaker>();
  for (const message of messages) {
    if (message.channel === SYSTEM_CHANNEL) continue;
    const id = speakerIdOf(message);
    const name = message.group?.senderName ?? stringOrUndefined(message.metadata.senderName);
    if (!speakers.has(id)) speakers.set(id, { id, ...(name && cleanName(name) !== "" ? { name: cleanName(name) } : {}) });
  }
  return [...speakers.values()];
}

/** The group a turn's messages come from, when they carry one (the last one's say). */
export function groupSettingOf(messages: InboundMessage[]): GroupSetting | undefined {
  const last = [...messages].reverse().find((message) => message.group !== undefined && message.channel !== SYSTEM_CHANNEL);
  if (!last?.group) return undefined;
  return {
    platform: last.channel,
    chatType: last.chatType === "thread" ? "thread" : "group",
    ...(last.group.botHandle ? { botHandle: last.group.botHandle } : {}),
    addressing: last.group.addressing,
  };
}

/** `[Alice (discord:123)]`, or `[feishu:ou_1]` when the platform gave no name. */
export function speakerLabel(speaker: Speaker): string {
  const name = speaker.name ? cleanName(speaker.name) : "";
  return name === "" ? `[${speaker.id}]` : `[${name} (${speaker.id})]`;
}

/**
 * A display name that cannot break out of its label or fake another: no brackets, parentheses,
 * line breaks or control characters, spaces collapsed, at most 64 characters.
 */
export function cleanName(name: string): string {
  const cleaned = name
    .replace(/[[\]()\p{Cc}\p{Cf}\u2028\u2029]/gu, " ")
    .replace(/\s+/g, " ")
    .trim();
  return cleaned.length <= MAX_NAME_CHARS ? cleaned : `${cleaned.slice(0, MAX_NAME_CHARS - 1)}…`;
}

/** Rewrites label-shaped text inside a message (`[Bob (discord:9)]` → `(quoted label: Bob (discord:9))`). */
export function neutralizeLabels(text: string): string {
  return text.replace(LABEL_SHAPE, (_match, name: string | undefined, id: string | undefined, bare: string | undefined) =>
    bare !== undefined ? `(quoted label: ${bare.trim()})` : `(quoted label: ${name ? `${name.trim()} ` : ""}(${id!.trim()}))`,
  );
}

/** One message as the model reads it: labelled when it comes from a multi-person chat. */
export function labelledContent(message: InboundMessage): string {
  if (message.channel === SYSTEM_CHANNEL) return `[Background event] ${message.content}`;
  if (!message.group) return message.content;
  const name = message.group.senderName;
  return `${speakerLabel({ id: speakerIdOf(message), ...(name ? { name } : {}) })} ${neutralizeLabels(message.content)}`;
}

/** One user turn from a burst: each message as {@link labelledContent} gives it, in order. */
export function combineContent(messages: InboundMessage[]): string {
  return messages.map(labelledContent).join("\n\n");
}

function stringOrUndefined(value: unknown): string | undefined {
  return typeof value === "string" && value !== "" ? value : undefined;
}
