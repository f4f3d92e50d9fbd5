/**
 * A Feishu message, normalized into a PlatformEvent.
 *
 * - Content: `text`; `post` (rich text) flattened to Markdown-ish text with mentions in place,
 *   links, code blocks and its images downloaded; `image` downloaded as an image part; `file`
 *   downloaded (capped) and named; `audio` (a voice message) downloaded as audio with its duration,
 *   for the gateway to transcribe. Other types become a note naming the type.
 * - Mentions: `@_user_N` keys resolved through `mentions[]` to `@name`. The bot is mentioned only
 *   when a mention carries the bot's own open_id (from the bot-info API), exactly: unknown open_id
 *   means not mentioned (fail closed), and `@_all` never counts.
 * - Sessions: the chat (`oc_…`), or with `groupSessionScope: thread` a topic thread of a group
 *   (`oc_…:om_<root>`), whose replies go into the thread.
 * - `eventId` is the message_id: a redelivered event and the same message under another event_id
 *   dedupe alike (the bus keeps `seen:` keys for a day, well past Feishu's redeliveries).
 */
import type { Media } from "../../src/bus/message.js";
import type { PlatformEvent } from "../../src/gateway/kit/index.js";
import {
  AudioContentSchema,
  FileContentSchema,
  ImageContentSchema,
  type Mention,
  type MessageEvent,
  type PostContent,
  PostContentSchema,
  type PostElement,
  TextContentSchema,
} from "./event-schema.js";
import type { DownloadResult, Resource } from "./resource-download.js";

export interface BotIdentity {
  openId: string;
  name: string;
}

export interface InboundContext {
  /** Undefined until the bot-info API answered: then no mention counts. */
  bot: BotIdentity | undefined;
  scope: "chat" | "thread";
  download(resource: Resource, signal: AbortSignal): Promise<DownloadResult>;
  /** Whether a message id is one the bot sent (replies to the bot). */
  sentByBot(messageId: string): boolean;
  now(): number;
}

/** `oc_x` or, for a topic thread, `oc_x:om_root`. */
export function splitChatId(chatId: string): { chatId: string; threadRoot?: string } {
  const at = chatId.indexOf(":");
  return at < 0 ? { chatId } : { chatId: chatId.slice(0, at), threadRoot: chatId.slice(at + 1) };
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
}

function isBot(mention: Mention | undefined, bot: BotIdentity | undefined): boolean {
  if (!mention || !bot || mention.key === "@_all") return false;
  return mention.id?.open_id === bot.openId;
}

function mentionName(mention: Mention, bot: BotIdentity | undefined): string {
  if (mention.key === "@_all") return "@all";
  if (isBot(mention, bot)) return `@${bot!.name}`;
  return `@${mention.name || mention.id?.open_id || "someone"}`;
}

/** Replaces each `@_user_N` / `@_all` key with the name it stands for. */
function resolveMentions(text: string, mentions: readonly Mention[], bot: BotIdentity | undefined): string {
  const byKey = new Map(mentions.map((mention) => [mention.key, mention]));
  return text.replace(/@_user_\d+|@_all/g, (key) => {
    const mention = byKey.get(key);
    return mention ? mentionName(mention, bot) : key === "@_all" ? "@all" : key;
  });
}

interface Flattened {
  text: string;
  mentionsBot: boolean;
  resources: Resource[];
}

function flattenElement(element: PostElement, messageId: string, mentions: readonly Mention[], bot: BotIdentity | undefined, into: Flattened): string {
  switch (element.tag) {
    case "text":
    case "md":
      return resolveMentions(element.text ?? "", mentions, bot);
    case "a":
      return element.href ? `[${element.text ?? element.href}](${element.href})` : (element.text ?? "");
    case "at": {
      // In a received post `user_id` holds the mention key; in one sent through the API, the open_id.
      const id = element.user_id ?? "";
      const mention = mentions.find((candidate) => candidate.key === id) ?? mentions.find((candidate) => candidate.id?.open_id === id);
      if (id === "all" || id === "@_all") return "@all";
      // Only a mention Feishu listed in `mentions[]` counts: an `at` element naming the bot's open_id
      // without one is text someone wrote, not a mention Feishu made.
      if (mention && isBot(mention, bot)) {
        into.mentionsBot = true;
        return `@${bot!.name}`;
      }
      return mention ? mentionName(mention, bot) : `@${element.user_name || id}`;
    }
    case "img":
      if (element.image_key) into.resources.push({ messageId, fileKey: element.image_key, type: "image", label: "image" });
      return "";
    case "media":
      return "[video]";
    case "emotion":
      return element.emoji_type ? `:${element.emoji_type}:` : "";
    case "code_block":
      return `\n\`\`\`${element.language?.toLowerCase() ?? ""}\n${element.text ?? ""}\n\`\`\`\n`;
    case "hr":
      return "\n---\n";
    default:
      return element.text ?? "";
  }
}

function flattenPost(post: PostContent, messageId: string, mentions: readonly Mention[], bot: BotIdentity | undefined): Flattened {
  const result: Flattened = { text: "", mentionsBot: false, resources: [] };
  const paragraphs = post.content.map((paragraph) =>
    paragraph
      .map((element) => flattenElement(element, messageId, mentions, bot, result))
      .join("")
      .trimEnd(),
  );
  result.text = [post.title ? post.title : undefined, ...paragraphs].filter((part) => part !== undefined).join("\n").replace(/\n{3,}/g, "\n\n").trim();
  return result;
}

function contentOf(message: MessageEvent["message"], bot: BotIdentity | undefined): Flattened {
  const mentions = message.mentions ?? [];
  const mentionsBot = mentions.some((mention) => isBot(mention, bot));
  const raw = parseJson(message.content);
  const { message_id: messageId } = message;
  switch (message.message_type) {
    case "text": {
      const parsed = TextContentSchema.safeParse(raw);
      return { text: parsed.success ? resolveMentions(parsed.data.text, mentions, bot) : "", mentionsBot, resources: [] };
    }
    case "post": {
      const parsed = PostContentSchema.safeParse(raw);
      if (!parsed.success) return { text: "", mentionsBot, resources: [] };
      const flattened = flattenPost(parsed.data, messageId, mentions, bot);
      return { ...flattened, mentionsBot: mentionsBot || flattened.mentionsBot };
    }
    case "image": {
      const parsed = ImageContentSchema.safeParse(raw);
      return { text: "", mentionsBot, resources: parsed.success ? [{ messageId, fileKey: parsed.data.image_key, type: "image", label: "image" }] : [] };
    }
    case "file": {
      const parsed = FileContentSchema.safeParse(raw);
      if (!parsed.success) return { text: "[a file]", mentionsBot, resources: [] };
      const name = parsed.data.file_name;
      const label = name ? `file "${name}"` : "file";
      return { text: `[${label}]`, mentionsBot, resources: [{ messageId, fileKey: parsed.data.file_key, type: "file", label, ...(name ? { name } : {}) }] };
    }
    case "audio": {
      const parsed = AudioContentSchema.safeParse(raw);
      if (!parsed.success) return { text: "[a voice message]", mentionsBot, resources: [] };
      const { duration } = parsed.data;
      const audio = duration === undefined ? {} : { durationSeconds: duration / 1000 };
      return { text: "", mentionsBot, resources: [{ messageId, fileKey: parsed.data.file_key, type: "file", label: "voice message", audio }] };
    }
    default:
      return { text: `[a ${message.message_type} message]`, mentionsBot, resources: [] };
  }
}

/** The session's chat id: the chat, or (thread scope, a message in a topic) the chat and the topic's root. */
export function sessionChatId(message: MessageEvent["message"], scope: "chat" | "thread"): string {
  if (scope !== "thread" || message.chat_type === "p2p") return message.chat_id;
  const root = message.root_id || (message.thread_id ? message.message_id : undefined);
  return root ? `${message.chat_id}:${root}` : message.chat_id;
}

/** Builds the event of one message; downloads its images and files first. Rejects only when `signal` aborts. */
export async function toPlatformEvent(event: MessageEvent, context: InboundContext, signal: AbortSignal): Promise<PlatformEvent> {
  const { message, sender } = event;
  const content = contentOf(message, context.bot);
  const media: Media[] = [];
  const notes: string[] = [];
  for (const resource of content.resources) {
    const result = await context.download(resource, signal);
    if ("media" in result) media.push(result.media);
    else notes.push(result.note);
  }
  const senderId = sender.sender_id?.open_id || sender.sender_id?.user_id || "unknown";
  const userId = sender.sender_id?.user_id;
  const chatId = sessionChatId(message, context.scope);
  const platformEvent: PlatformEvent = {
    eventId: message.message_id,
    chatId,
    // A topic thread with a session of its own is a thread; the group's mention policy holds there too.
    chatType: message.chat_type === "p2p" ? "private" : chatId.includes(":") ? "thread" : "group",
    senderId,
    senderIsBot: sender.sender_type !== undefined && sender.sender_type !== "user",
    ...(userId && userId !== senderId ? { scopes: [userId] } : {}),
    text: [content.text, ...notes].filter((part) => part.length > 0).join("\n\n"),
    mentionsBot: content.mentionsBot,
    repliesToBot: Boolean(message.parent_id && context.sentByBot(message.parent_id)),
    platformMessageId: message.message_id,
    media,
    receivedAt: context.now(),
    metadata: {
      feishuChatId: message.chat_id,
      feishuEventId: event.event_id,
      ...(message.thread_id ? { threadId: message.thread_id } : {}),
      ...(message.root_id ? { rootId: message.root_id } : {}),
    },
  };
  return platformEvent;
}
