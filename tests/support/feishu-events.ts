/**
 * `im.message.receive_v1` events as Feishu sends them (schema 2.0): a header with the event id,
 * and the message with its content as a JSON string. Mentions appear in the text as `@_user_N`
 * keys, resolved in `mentions[]`; `@_all` is everyone.
 */
import { randomBytes } from "node:crypto";

export interface FakeUser {
  openId: string;
  userId?: string;
  name: string;
}

export type MentionTarget = FakeUser | "all";

export interface FakeEventInput {
  chatId: string;
  chatType: "p2p" | "group";
  sender: FakeUser;
  /** Text messages: the text, after the mentions (which come first, as a client puts them). */
  text?: string;
  mentions?: MentionTarget[];
  /** Default `text`. */
  type?: "text" | "post" | "image" | "file" | "audio";
  /** Post messages: paragraphs of elements; `{ tag: "at", mention: N }` refers to mentions[N]. */
  post?: { title?: string; content: Array<Array<Record<string, unknown>>> };
  imageKey?: string;
  fileKey?: string;
  fileName?: string;
  /** Voice (`audio`) messages: how long the recording plays, in milliseconds. */
  durationMs?: number;
  /** A message in a topic thread: the thread's root message (and its omt_ id). */
  rootId?: string;
  threadId?: string;
  parentId?: string;
  messageId?: string;
  eventId?: string;
  /** ms since the epoch. Default now. */
  createTime?: number;
  senderType?: "user" | "app";
}

export interface FeishuEventEnvelope {
  schema: "2.0";
  header: { event_id: string; event_type: string; create_time: string; token: string; app_id: string; tenant_key: string };
  event: {
    sender: { sender_id: { open_id: string; user_id?: string; union_id: string }; sender_type: string; tenant_key: string };
    message: {
      message_id: string;
      root_id?: string;
      parent_id?: string;
      thread_id?: string;
      create_time: string;
      update_time: string;
      chat_id: string;
      chat_type: string;
      message_type: string;
      content: string;
      mentions?: Array<{ key: string; id: { open_id: string; user_id?: string; union_id: string }; name: string; tenant_key: string }>;
    };
  };
}

let counter = 0;
const id = (prefix: string) => `${prefix}${Date.now().toString(16)}${(counter++).toString(16).padStart(4, "0")}${randomBytes(4).toString("hex")}`;

export function buildEvent(input: FakeEventInput, context: { appId: string }): FeishuEventEnvelope {
  const mentions = (input.mentions ?? []).map((target, index) =>
    target === "all"
      ? { key: "@_all", id: { open_id: "", union_id: "" }, name: "所有人", tenant_key: "tenant-fake" }
      : { key: `@_user_${index + 1}`, id: { open_id: target.openId, ...(target.userId ? { user_id: target.userId } : {}), union_id: `on_${target.openId.slice(3)}` }, name: target.name, tenant_key: "tenant-fake" },
  );
  const type = input.type ?? "text";
  let content: Record<string, unknown>;
  if (type === "text") content = { text: [...mentions.map((mention) => mention.key), input.text ?? ""].join(" ").trim() };
  else if (type === "post") {
    const paragraphs = (input.post?.content ?? []).map((paragraph) =>
      paragraph.map((element) => {
        if (element.tag !== "at" || typeof element.mention !== "number") return element;
        const mention = mentions[element.mention]!;
        return { tag: "at", user_id: mention.key, user_name: mention.name };
      }),
    );
    content = { title: input.post?.title ?? "", content: paragraphs };
  } else if (type === "image") content = { image_key: input.imageKey ?? id("img_v3_") };
  else if (type === "audio") content = { file_key: input.fileKey ?? id("file_v3_"), duration: input.durationMs ?? 1_000 };
  else content = { file_key: input.fileKey ?? id("file_v3_"), file_name: input.fileName ?? "file.bin" };
  const created = String(input.createTime ?? Date.now());
  return {
    schema: "2.0",
    header: { event_id: input.eventId ?? id("ev"), event_type: "im.message.receive_v1", create_time: created, token: "", app_id: context.appId, tenant_key: "tenant-fake" },
    event: {
      sender: {
        sender_id: { open_id: input.sender.openId, ...(input.sender.userId ? { user_id: input.sender.userId } : {}), union_id: `on_${input.sender.openId.slice(3)}` },
        sender_type: input.senderType ?? "user",
        tenant_key: "tenant-fake",
      },
      message: {
        message_id: input.messageId ?? id("om_"),
        ...(input.rootId ? { root_id: input.rootId } : {}),
        ...(input.parentId ?? input.rootId ? { parent_id: input.parentId ?? input.rootId } : {}),
        ...(input.threadId ? { thread_id: input.threadId } : {}),
        create_time: created,
        update_time: created,
        chat_id: input.chatId,
        chat_type: input.chatType,
        message_type: type,
        content: JSON.stringify(content),
        ...(mentions.length > 0 ? { mentions } : {}),
      },
    },
  };
}
