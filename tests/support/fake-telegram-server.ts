/**
 * A fake Telegram Bot API server, spoken to by the real client (telegraf): `POST /bot<token>/<method>`
 * with JSON, urlencoded or multipart bodies (or query parameters), answered `{ ok: true, result }` or
 * `{ ok: false, error_code, description, parameters }` the way api.telegram.org does, with the real
 * error descriptions the adapter maps.
 *
 * ```ts
 * const telegram = await startFakeTelegram({ token: "123:secret" });
 * const alice = telegram.user({ id: 42, first_name: "Alice" });
 * telegram.sendText({ chatId: 42, from: alice, text: "hi" });        // queued for getUpdates
 * await telegram.waitFor(() => telegram.sent.find((item) => item.method === "sendMessage"));
 * telegram.failNext("sendMessage", { error_code: 429, retry_after: 3 });
 * ```
 *
 * Methods: getMe, getUpdates (offset confirms, `timeout` holds the request until an update is
 * queued; 409 while a webhook is set or when a newer getUpdates replaces a held one), sendMessage,
 * editMessageText, sendMessageDraft, sendChatAction, getFile and `GET /file/bot<token>/<path>`,
 * setWebhook, deleteWebhook, getWebhookInfo. HTML in `parse_mode: "HTML"` is checked (tags Telegram
 * supports, balanced), and {@link FakeTelegramServer.rejectParseMode} refuses any parse_mode.
 *
 * Rate limits (`limits`, off unless given; {@link TELEGRAM_PUBLISHED_LIMITS} are Telegram's): a
 * message, edit or draft over a chat's budget, a message or edit over a group's (per minute), or any
 * send over the bot's, is answered 429 `Too Many Requests: retry after N` with `retry_after`, as
 * Telegram does; {@link FakeTelegramServer.rateLimited} counts them, and `FAKE_LIMIT_DEBUG=1` prints
 * each with the budget it broke and the calls in its window (sliding-limits.ts).
 */
import { createServer, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { sendJson } from "./scripted-http-server.js";
import { type Refusal, type SlidingLimit, SlidingLimits, logRefusal } from "./sliding-limits.js";

/** The budgets a fake Telegram enforces; each optional. */
export interface TelegramLimits {
  /** sendMessage, editMessageText, sendMessageDraft in one chat. */
  chat?: SlidingLimit;
  /** sendMessage and editMessageText in one group chat. */
  group?: SlidingLimit;
  /** Every send (chat actions too) of the bot. */
  bot?: SlidingLimit;
}

/** Telegram's published limits: about 1 a second in a chat, 20 a minute in a group, 30 a second in all. */
export const TELEGRAM_PUBLISHED_LIMITS: TelegramLimits = {
  chat: { limit: 1, windowMs: 1_000 },
  group: { limit: 20, windowMs: 60_000 },
  bot: { limit: 30, windowMs: 1_000 },
};

export interface FakeUser {
  id: number;
  is_bot: boolean;
  first_name: string;
  last_name?: string;
  username?: string;
}

export interface FakeChat {
  id: number;
  type: "private" | "group" | "supergroup";
  title?: string;
  first_name?: string;
}

export interface FakeEntity {
  type: "mention" | "text_mention" | "bot_command" | "bold" | "code" | (string & {});
  offset: number;
  length: number;
  user?: FakeUser;
}

export interface FakeFileRef {
  file_id: string;
  file_unique_id: string;
  file_size?: number;
}

export interface FakeMessage {
  message_id: number;
  date: number;
  chat: FakeChat;
  from?: FakeUser;
  text?: string;
  caption?: string;
  entities?: FakeEntity[];
  caption_entities?: FakeEntity[];
  photo?: Array<FakeFileRef & { width: number; height: number }>;
  document?: FakeFileRef & { file_name?: string; mime_type?: string };
  voice?: FakeFileRef & { duration: number; mime_type?: string };
  audio?: FakeFileRef & { duration: number; mime_type?: string; file_name?: string };
  reply_to_message?: FakeMessage;
  edit_date?: number;
}

export interface FakeUpdate {
  update_id: number;
  message?: FakeMessage;
}

export interface FakeFile {
  file_id: string;
  file_unique_id: string;
  file_path: string;
  bytes: Buffer;
  /** file_size as announced; undefined when the fake leaves it out. */
  declaredSize?: number;
}

/** An error the next call of a method answers with. */
export interface ApiFailure {
  error_code: number;
  /** Default: Telegram's usual text for the code, e.g. `Too Many Requests: retry after 3`. */
  description?: string;
  retry_after?: number;
}

export interface TelegramCall {
  method: string;
  params: Record<string, unknown>;
  headers: IncomingHttpHeaders;
  /** Set when the call was answered with an error. */
  failed?: { error_code: number; description: string };
  /** When the call arrived (ms since the epoch). */
  at: number;
}

export interface SentItem {
  method: "sendMessage" | "editMessageText" | "sendMessageDraft" | "sendChatAction";
  chatId: number;
  text?: string;
  parseMode?: string;
  /** sendMessage: reply_parameters.message_id or reply_to_message_id. */
  replyToMessageId?: number;
  /** The message created or edited. */
  messageId?: number;
  draftId?: number;
  action?: string;
  params: Record<string, unknown>;
}

export interface SendTextInput {
  chatId: number;
  from: FakeUser;
  text: string;
  /** Default: `private` for a positive chat id, `group` for a negative one. */
  chatType?: FakeChat["type"];
  /** Default: found in the text as a client does (`@name` mentions, a leading `/command`). */
  entities?: FakeEntity[];
  replyToMessage?: FakeMessage;
}

export interface SendPhotoInput extends Omit<SendTextInput, "text" | "entities"> {
  bytes: Buffer;
  caption?: string;
}

export interface SendDocumentInput extends Omit<SendTextInput, "text" | "entities"> {
  bytes: Buffer;
  fileName: string;
  mimeType?: string;
  caption?: string;
  /** The file_size announced in the message and by getFile. Default: the real size; null leaves it out. */
  declaredSize?: number | null;
}

/** A voice note (`voice`: Ogg Opus, saved as `.oga` like Telegram's) or a music file (`audio`). */
export interface SendVoiceInput extends Omit<SendTextInput, "text" | "entities"> {
  bytes: Buffer;
  /** Seconds, as announced in the message. */
  duration: number;
  /** Default `voice`. */
  as?: "voice" | "audio";
  mimeType?: string;
  caption?: string;
}

export interface FakeTelegramOptions {
  token: string;
  bot?: Partial<FakeUser>;
  /** Rate limits to enforce with real 429 answers. Default: none. */
  limits?: TelegramLimits;
}

export interface FakeTelegramServer {
  /** `http://127.0.0.1:<port>`: telegraf's `apiRoot`. */
  apiRoot: string;
  botUser: FakeUser;
  /** Every API call, in order (failed ones too). */
  requests: TelegramCall[];
  /** Everything the bot sent (messages, edits, drafts, chat actions), in order. */
  sent: SentItem[];
  /** The webhook set with setWebhook, if any. */
  webhook: { url: string; secretToken?: string } | undefined;
  /** getUpdates requests held open right now. */
  readonly pendingPolls: number;
  /** Calls answered 429 because they broke a budget of `limits`. */
  readonly rateLimited: number;
  user(fields: Partial<FakeUser> & { id: number }): FakeUser;
  addChat(chat: FakeChat): void;
  /** A message the fake knows (sent by a user in an update, or by the bot), e.g. to reply to it. */
  messageOf(chatId: number, messageId: number): FakeMessage | undefined;
  queueUpdate(update: Omit<FakeUpdate, "update_id"> & { update_id?: number }): FakeUpdate;
  textUpdate(input: SendTextInput): FakeUpdate;
  sendText(input: SendTextInput): FakeUpdate;
  photoUpdate(input: SendPhotoInput): FakeUpdate;
  sendPhoto(input: SendPhotoInput): FakeUpdate;
  documentUpdate(input: SendDocumentInput): FakeUpdate;
  sendDocument(input: SendDocumentInput): FakeUpdate;
  voiceUpdate(input: SendVoiceInput): FakeUpdate;
  sendVoice(input: SendVoiceInput): FakeUpdate;
  storeFile(bytes: Buffer, options?: { extension?: string; declaredSize?: number | null }): FakeFile;
  /** The next call of `method` fails with this error. */
  failNext(method: string, failure: ApiFailure): void;
  /** While on, any text with a parse_mode gets 400 "can't parse entities". */
  rejectParseMode(enabled?: boolean): void;
  /** POSTs the update (or a raw body) to the webhook with its secret header (or the one given; null: none). */
  deliverWebhook(update: unknown, options?: { secret?: string | null; rawBody?: string }): Promise<{ status: number; text: string }>;
  waitFor<T>(predicate: () => T | undefined | null | false, options?: { timeoutMs?: number; what?: string }): Promise<T>;
  close(): Promise<void>;
}

const supportedTags = new Set(["b", "strong", "i", "em", "u", "ins", "s", "strike", "del", "span", "tg-spoiler", "a", "code", "pre", "blockquote", "tg-emoji"]);
/** Form fields that stay strings even when they look like numbers or JSON. */
const stringFields = new Set(["text", "caption", "url", "secret_token", "parse_mode", "action", "file_id"]);
const maxGetFileBytes = 20 * 1024 * 1024;

function failure(error_code: number, description: string, retry_after?: number) {
  return { ok: false, error_code, description, ...(retry_after === undefined ? {} : { parameters: { retry_after } }) };
}

function defaultDescription(code: number, retryAfter?: number): string {
  if (code === 429) return `Too Many Requests: retry after ${retryAfter ?? 1}`;
  if (code === 403) return "Forbidden: bot was blocked by the user";
  if (code === 401) return "Unauthorized";
  if (code >= 500) return "Internal Server Error";
  return "Bad Request";
}

/** The HTML check of Telegram's parser, as far as tests need it: supported tags, properly nested. */
function htmlProblem(text: string): string | undefined {
  const open: string[] = [];
  for (const match of text.matchAll(/<(\/?)([a-zA-Z][\w-]*)[^>]*>/g)) {
    const [, closing, rawName] = match;
    const name = rawName!.toLowerCase();
    const offset = Buffer.byteLength(text.slice(0, match.index));
    if (!closing) {
      if (!supportedTags.has(name)) return `Unsupported start tag "${name}" at byte offset ${offset}`;
      open.push(name);
    } else if (open.pop() !== name) {
      return `Unexpected end tag at byte offset ${offset}`;
    }
  }
  const unclosed = open.pop();
  return unclosed ? `Can't find end tag corresponding to start tag "${unclosed}"` : undefined;
}

function visibleLength(text: string, parseMode: unknown): number {
  if (parseMode !== "HTML") return text.length;
  return text.replace(/<[^>]*>/g, "").replace(/&(lt|gt|amp|quot|#\d+);/g, "_").length;
}

/** The entities a Telegram client attaches: @mentions and a leading /command. */
function detectEntities(text: string): FakeEntity[] {
  const entities: FakeEntity[] = [];
  const command = /^\/\w+(@\w+)?/.exec(text);
  if (command) entities.push({ type: "bot_command", offset: 0, length: command[0].length });
  for (const match of text.matchAll(/(?<![\w/])@\w{3,32}/g)) entities.push({ type: "mention", offset: match.index, length: match[0].length });
  return entities;
}

function coerce(key: string, value: string): unknown {
  if (stringFields.has(key)) return value;
  if (/^-?\d+$/.test(value)) return Number(value);
  if (value === "true" || value === "false") return value === "true";
  if (/^[[{]/.test(value)) {
    try {
      return JSON.parse(value) as unknown;
    } catch {
      return value;
    }
  }
  return value;
}

/** Text fields of a multipart body (file parts are kept as their byte length). */
function parseMultipart(body: Buffer, boundary: string): Record<string, unknown> {
  const params: Record<string, unknown> = {};
  for (const part of body.toString("latin1").split(`--${boundary}`)) {
    const split = part.indexOf("\r\n\r\n");
    if (split < 0) continue;
    const head = part.slice(0, split);
    const name = /name="([^"]+)"/.exec(head)?.[1];
    if (!name) continue;
    const value = Buffer.from(part.slice(split + 4).replace(/\r\n$/, ""), "latin1");
    params[name] = /filename="/.test(head) ? { bytes: value.length } : coerce(name, value.toString("utf8"));
  }
  return params;
}

function parseParams(incoming: IncomingMessage, body: Buffer, url: URL): Record<string, unknown> {
  const params: Record<string, unknown> = {};
  for (const [key, value] of url.searchParams) params[key] = coerce(key, value);
  const type = incoming.headers["content-type"] ?? "";
  if (body.length === 0) return params;
  if (type.includes("application/json")) return { ...params, ...(JSON.parse(body.toString("utf8")) as Record<string, unknown>) };
  if (type.includes("application/x-www-form-urlencoded")) {
    for (const [key, value] of new URLSearchParams(body.toString("utf8"))) params[key] = coerce(key, value);
    return params;
  }
  const boundary = /boundary=([^;]+)/.exec(type)?.[1];
  if (type.includes("multipart/form-data") && boundary) return { ...params, ...parseMultipart(body, boundary) };
  return params;
}

function readBody(incoming: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    incoming.on("data", (chunk: Buffer) => chunks.push(chunk));
    incoming.on("end", () => resolve(Buffer.concat(chunks)));
    incoming.on("error", reject);
  });
}

interface HeldPoll {
  limit: number;
  answer(result: FakeUpdate[]): void;
  conflict(): void;
}

export async function startFakeTelegram(options: FakeTelegramOptions): Promise<FakeTelegramServer> {
  const { token } = options;
  const botUser: FakeUser = { id: Number(token.split(":")[0]) || 1_000_001, is_bot: true, first_name: "CountBot", username: "CountBot", ...options.bot };
  const requests: TelegramCall[] = [];
  const sent: SentItem[] = [];
  const queue: FakeUpdate[] = [];
  const held = new Set<HeldPoll>();
  const chats = new Map<number, FakeChat>();
  const messages = new Map<string, FakeMessage>();
  const files = new Map<string, FakeFile>();
  const failures = new Map<string, ApiFailure[]>();
  let nextUpdateId = 100_000;
  let nextMessageId = 1;
  let nextFileId = 1;
  let parseModeRejected = false;
  const limiter = new SlidingLimits();
  let rateLimited = 0;
  let webhook: FakeTelegramServer["webhook"];

  const messageKey = (chatId: number, messageId: number) => `${chatId}:${messageId}`;
  const date = () => Math.floor(Date.now() / 1000);

  function wakePolls(): void {
    for (const poll of [...held]) if (queue.length > 0) poll.answer(queue.slice(0, poll.limit));
  }

  function chatFor(input: { chatId: number; from: FakeUser; chatType?: FakeChat["type"] }): FakeChat {
    const known = chats.get(input.chatId);
    if (known) return known;
    const type = input.chatType ?? (input.chatId > 0 ? "private" : "group");
    const chat: FakeChat = type === "private" ? { id: input.chatId, type, first_name: input.from.first_name } : { id: input.chatId, type, title: `Group ${input.chatId}` };
    chats.set(chat.id, chat);
    return chat;
  }

  function baseMessage(input: Omit<SendTextInput, "text">): FakeMessage {
    const message: FakeMessage = { message_id: nextMessageId++, date: date(), chat: chatFor(input), from: input.from };
    if (input.replyToMessage) message.reply_to_message = input.replyToMessage;
    return message;
  }

  function storeMessage(message: FakeMessage): FakeMessage {
    messages.set(messageKey(message.chat.id, message.message_id), message);
    return message;
  }

  const server: FakeTelegramServer = {
    apiRoot: "",
    botUser,
    requests,
    sent,
    get webhook() {
      return webhook;
    },
    get pendingPolls() {
      return held.size;
    },
    get rateLimited() {
      return rateLimited;
    },
    user: (fields) => ({ is_bot: false, first_name: `User${fields.id}`, ...fields }),
    addChat: (chat) => void chats.set(chat.id, chat),
    messageOf: (chatId, messageId) => messages.get(messageKey(chatId, messageId)),
    queueUpdate(update) {
      const full = { ...update, update_id: update.update_id ?? nextUpdateId++ } as FakeUpdate;
      if (full.message) storeMessage(full.message);
      queue.push(full);
      wakePolls();
      return full;
    },
    textUpdate(input) {
      const message = { ...baseMessage(input), text: input.text };
      const entities = input.entities ?? detectEntities(input.text);
      if (entities.length > 0) message.entities = entities;
      return { update_id: nextUpdateId++, message };
    },
    sendText: (input) => server.queueUpdate(server.textUpdate(input)),
    photoUpdate(input) {
      const thumbnail = server.storeFile(input.bytes.subarray(0, Math.min(16, input.bytes.length)), { extension: "jpg" });
      const full = server.storeFile(input.bytes, { extension: "jpg" });
      const message: FakeMessage = {
        ...baseMessage(input),
        photo: [
          { file_id: thumbnail.file_id, file_unique_id: thumbnail.file_unique_id, file_size: thumbnail.bytes.length, width: 90, height: 60 },
          { file_id: full.file_id, file_unique_id: full.file_unique_id, file_size: full.bytes.length, width: 1280, height: 853 },
        ],
      };
      if (input.caption !== undefined) message.caption = input.caption;
      return { update_id: nextUpdateId++, message };
    },
    sendPhoto: (input) => server.queueUpdate(server.photoUpdate(input)),
    documentUpdate(input) {
      const extension = /\.(\w+)$/.exec(input.fileName)?.[1] ?? "dat";
      const file = server.storeFile(input.bytes, { extension, declaredSize: input.declaredSize });
      const document: NonNullable<FakeMessage["document"]> = { file_id: file.file_id, file_unique_id: file.file_unique_id, file_name: input.fileName };
      if (input.mimeType) document.mime_type = input.mimeType;
      if (file.declaredSize !== undefined) document.file_size = file.declaredSize;
      const message: FakeMessage = { ...baseMessage(input), document };
      if (input.caption !== undefined) message.caption = input.caption;
      return { update_id: nextUpdateId++, message };
    },
    sendDocument: (input) => server.queueUpdate(server.documentUpdate(input)),
    voiceUpdate(input) {
      const as = input.as ?? "voice";
      const file = server.storeFile(input.bytes, { extension: as === "voice" ? "oga" : "mp3" });
      const reference = { file_id: file.file_id, file_unique_id: file.file_unique_id, file_size: input.bytes.length, duration: input.duration };
      const mimeType = input.mimeType ?? (as === "voice" ? "audio/ogg" : "audio/mpeg");
      const message: FakeMessage = { ...baseMessage(input), [as]: { ...reference, mime_type: mimeType } };
      if (input.caption !== undefined) message.caption = input.caption;
      return { update_id: nextUpdateId++, message };
    },
    sendVoice: (input) => server.queueUpdate(server.voiceUpdate(input)),
    storeFile(bytes, fileOptions = {}) {
      const number = nextFileId++;
      const file: FakeFile = {
        file_id: `file-${number}-${"x".repeat(20)}`,
        file_unique_id: `unique${number}`,
        file_path: `files/file_${number}.${fileOptions.extension ?? "dat"}`,
        bytes,
      };
      if (fileOptions.declaredSize !== null) file.declaredSize = fileOptions.declaredSize ?? bytes.length;
      files.set(file.file_id, file);
      return file;
    },
    failNext(method, apiFailure) {
      failures.set(method, [...(failures.get(method) ?? []), apiFailure]);
    },
    rejectParseMode(enabled = true) {
      parseModeRejected = enabled;
    },
    async deliverWebhook(update, deliverOptions = {}) {
      if (!webhook) throw new Error("fake Telegram: no webhook is set");
      const secret = deliverOptions.secret === undefined ? webhook.secretToken : deliverOptions.secret;
      const headers: Record<string, string> = { "content-type": "application/json" };
      if (secret !== null && secret !== undefined) headers["x-telegram-bot-api-secret-token"] = secret;
      const response = await fetch(webhook.url, { method: "POST", headers, body: deliverOptions.rawBody ?? JSON.stringify(update) });
      return { status: response.status, text: await response.text() };
    },
    async waitFor(predicate, waitOptions = {}) {
      const deadline = Date.now() + (waitOptions.timeoutMs ?? 5_000);
      for (;;) {
        const value = predicate();
        if (value) return value;
        if (Date.now() > deadline) throw new Error(`fake Telegram: timed out waiting for ${waitOptions.what ?? "a condition"}`);
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
    },
    close: () => Promise.resolve(),
  };

  /** The budget of `options.limits` this call breaks, if it breaks one (and counts it otherwise). */
  function overBudget(method: string, chat: FakeChat | undefined, label: string, now: number): Refusal | undefined {
    const limits = options.limits;
    if (!limits || !chat) return undefined;
    const inChat = method === "sendMessage" || method === "editMessageText" || method === "sendMessageDraft";
    const counted = inChat || method === "sendChatAction";
    if (!counted) return undefined;
    const group = chat.type !== "private" && method !== "sendMessageDraft";
    return limiter.hit([
      [`chat:${chat.id}`, inChat ? limits.chat : undefined],
      [`group:${chat.id}`, inChat && group ? limits.group : undefined],
      ["bot", limits.bot],
    ], now, label);
  }

  /** Answers one API call; returns the `{ ok, ... }` body and whether the answer is deferred (held poll). */
  function call(method: string, params: Record<string, unknown>, response: ServerResponse): Record<string, unknown> | undefined {
    const injected = failures.get(method)?.shift();
    if (injected) return failure(injected.error_code, injected.description ?? defaultDescription(injected.error_code, injected.retry_after), injected.retry_after);
    const ok = (result: unknown) => ({ ok: true, result });
    const chatId = Number(params.chat_id);
    const chat = chats.get(chatId);
    const now = Date.now();
    const label = `${method} chat=${chatId}${params.message_id === undefined ? "" : ` msg=${String(params.message_id)}`}`;
    const limited = overBudget(method, chat, label, now);
    if (limited) {
      rateLimited += 1;
      logRefusal("telegram", label, limited, now);
      const retryAfter = Math.max(1, Math.ceil(limited.retryAfterMs / 1000));
      return failure(429, `Too Many Requests: retry after ${retryAfter}`, retryAfter);
    }
    const checkText = (text: unknown, parseMode: unknown): Record<string, unknown> | undefined => {
      if (typeof text !== "string" || text.length === 0) return failure(400, "Bad Request: message text is empty");
      if (parseMode !== undefined && parseModeRejected) return failure(400, "Bad Request: can't parse entities: Unsupported start tag \"x\" at byte offset 0");
      const problem = parseMode === "HTML" ? htmlProblem(text) : undefined;
      if (problem) return failure(400, `Bad Request: can't parse entities: ${problem}`);
      if (visibleLength(text, parseMode) > 4096) return failure(400, "Bad Request: message is too long");
      return undefined;
    };
    switch (method) {
      case "getMe":
        return ok({ ...botUser, can_join_groups: true, can_read_all_group_messages: false, supports_inline_queries: false });
      case "getUpdates": {
        if (webhook) return failure(409, "Conflict: can't use getUpdates method while webhook is active; use deleteWebhook to delete the webhook first");
        const offset = typeof params.offset === "number" ? params.offset : undefined;
        if (offset !== undefined && offset >= 0) {
          while (queue.length > 0 && queue[0]!.update_id < offset) queue.shift();
        } else if (offset !== undefined) {
          queue.splice(0, Math.max(0, queue.length + offset));
        }
        const limit = Math.min(100, Math.max(1, Number(params.limit ?? 100)));
        const timeout = Number(params.timeout ?? 0);
        if (queue.length > 0 || timeout <= 0) return ok(queue.slice(0, limit));
        for (const other of [...held]) other.conflict();
        const poll: HeldPoll = {
          limit,
          answer: (result) => finish(ok(result)),
          conflict: () => finish(failure(409, "Conflict: terminated by other getUpdates request; make sure that only one bot instance is running")),
        };
        const timer = setTimeout(() => poll.answer([]), timeout * 1000);
        const finish = (body: Record<string, unknown>) => {
          clearTimeout(timer);
          held.delete(poll);
          if (!response.writableEnded && !response.destroyed) sendJson(response, body.ok ? 200 : Number(body.error_code), body);
        };
        response.once("close", () => {
          clearTimeout(timer);
          held.delete(poll);
        });
        held.add(poll);
        return undefined;
      }
      case "sendMessage": {
        if (!chat) return failure(400, "Bad Request: chat not found");
        const invalid = checkText(params.text, params.parse_mode);
        if (invalid) return invalid;
        const replyParameters = params.reply_parameters as { message_id?: number; allow_sending_without_reply?: boolean } | undefined;
        const replyTo = replyParameters?.message_id ?? (params.reply_to_message_id as number | undefined);
        const allowWithout = replyParameters?.allow_sending_without_reply ?? params.allow_sending_without_reply === true;
        const original = replyTo === undefined ? undefined : messages.get(messageKey(chatId, replyTo));
        if (replyTo !== undefined && !original && !allowWithout) return failure(400, "Bad Request: message to be replied not found");
        const message = storeMessage({ message_id: nextMessageId++, date: date(), chat, from: botUser, text: params.text as string });
        if (original) message.reply_to_message = original;
        sent.push({ method, chatId, text: message.text, parseMode: params.parse_mode as string | undefined, replyToMessageId: replyTo, messageId: message.message_id, params });
        return ok(message);
      }
      case "editMessageText": {
        if (!chat) return failure(400, "Bad Request: chat not found");
        const message = messages.get(messageKey(chatId, Number(params.message_id)));
        if (!message || message.from?.id !== botUser.id) return failure(400, "Bad Request: message to edit not found");
        const invalid = checkText(params.text, params.parse_mode);
        if (invalid) return invalid;
        if (message.text === params.text) {
          return failure(400, "Bad Request: message is not modified: specified new message content and reply markup are exactly the same as a current content and reply markup of the message");
        }
        message.text = params.text as string;
        message.edit_date = date();
        sent.push({ method, chatId, text: message.text, parseMode: params.parse_mode as string | undefined, messageId: message.message_id, params });
        return ok(message);
      }
      case "sendMessageDraft": {
        if (!chat) return failure(400, "Bad Request: chat not found");
        if (!Number.isInteger(params.draft_id) || params.draft_id === 0) return failure(400, "Bad Request: invalid draft_id specified");
        sent.push({ method, chatId, text: params.text as string | undefined, parseMode: params.parse_mode as string | undefined, draftId: params.draft_id as number, params });
        return ok(true);
      }
      case "sendChatAction":
        if (!chat) return failure(400, "Bad Request: chat not found");
        sent.push({ method, chatId, action: params.action as string, params });
        return ok(true);
      case "getFile": {
        const file = files.get(String(params.file_id));
        if (!file) return failure(400, "Bad Request: invalid file_id");
        if ((file.declaredSize ?? file.bytes.length) > maxGetFileBytes) return failure(400, "Bad Request: file is too big");
        return ok({ file_id: file.file_id, file_unique_id: file.file_unique_id, file_path: file.file_path, ...(file.declaredSize === undefined ? {} : { file_size: file.declaredSize }) });
      }
      case "setWebhook":
        if (typeof params.url !== "string" || params.url === "") {
          webhook = undefined;
          return ok(true);
        }
        webhook = { url: params.url, secretToken: params.secret_token as string | undefined };
        return { ok: true, result: true, description: "Webhook was set" };
      case "deleteWebhook": {
        const description = webhook ? "Webhook was deleted" : "Webhook is already deleted";
        webhook = undefined;
        if (params.drop_pending_updates === true) queue.splice(0);
        return { ok: true, result: true, description };
      }
      case "getWebhookInfo":
        return ok({ url: webhook?.url ?? "", has_custom_certificate: false, pending_update_count: queue.length });
      default:
        return failure(404, "Not Found");
    }
  }

  const http = createServer((incoming, response) => {
    void (async () => {
      const body = await readBody(incoming);
      const url = new URL(incoming.url ?? "/", "http://fake-telegram");
      const file = /^\/file\/bot([^/]+)\/(.+)$/.exec(url.pathname);
      if (file) {
        const stored = [...files.values()].find((candidate) => candidate.file_path === decodeURIComponent(file[2]!));
        if (file[1] !== token || !stored) return sendJson(response, 404, failure(404, "Not Found"));
        // A file whose size is not announced is streamed chunked, without content-length either.
        const length = stored.declaredSize === undefined ? {} : { "content-length": String(stored.bytes.length) };
        response.writeHead(200, { "content-type": "application/octet-stream", ...length });
        response.end(stored.bytes);
        return;
      }
      const api = /^\/bot([^/]+)\/(\w+)$/.exec(url.pathname);
      if (!api) return sendJson(response, 404, failure(404, "Not Found"));
      const method = api[2]!;
      let params: Record<string, unknown>;
      try {
        params = parseParams(incoming, body, url);
      } catch {
        return sendJson(response, 400, failure(400, "Bad Request: can't parse JSON object"));
      }
      const request: TelegramCall = { method, params, headers: incoming.headers as IncomingHttpHeaders, at: Date.now() };
      requests.push(request);
      if (api[1] !== token) return sendJson(response, 401, failure(401, "Unauthorized"));
      const answer = call(method, params, response);
      if (!answer) return;
      if (!answer.ok) request.failed = { error_code: Number(answer.error_code), description: String(answer.description) };
      sendJson(response, answer.ok ? 200 : Number(answer.error_code), answer);
    })().catch((error: unknown) => {
      if (!response.headersSent) sendJson(response, 500, failure(500, `Internal Server Error: ${String(error)}`));
    });
  });
  await new Promise<void>((resolve) => http.listen(0, "127.0.0.1", resolve));
  server.apiRoot = `http://127.0.0.1:${(http.address() as AddressInfo).port}`;
  server.close = () =>
    new Promise<void>((resolve) => {
      for (const poll of [...held]) poll.answer([]);
      http.closeAllConnections();
      http.close(() => resolve());
    });
  return server;
}
