/**
 * A fake Slack, spoken to by the real SDK (`@slack/web-api`, `@slack/socket-mode`) through
 * `slackApiUrl: fake.apiUrl`:
 *
 * - Web API methods as `POST /api/<method>` (form-encoded, or JSON), the token in
 *   `Authorization: Bearer`, answered `{ok: true, …}` or `{ok: false, error}`:
 *   `auth.test`, `apps.connections.open` (the app-level token only: a ws URL on this server),
 *   `chat.postMessage`, `chat.update`, `users.info`, `conversations.replies` (the users' messages
 *   the fake built and the bot's posts);
 * - rate limits as Slack's: more than `postsPerSecond` chat.postMessage calls into one channel in a
 *   second, or `updatesPerMinute` chat.update calls in a minute, get HTTP 429 with `Retry-After`;
 *   each is recorded in `rateLimited`;
 * - files at `url_private_download` URLs, only with the bot token (a sign-in page otherwise);
 * - Socket Mode envelopes with acknowledgements and redelivery (fake-slack-socket.ts);
 * - signed HTTP requests to an app's Request URL ({@link FakeSlackServer.postEvent}).
 *
 * Failures on demand: {@link FakeSlackServer.failNext}.
 */
import { randomUUID } from "node:crypto";
import { type IncomingMessage, type ServerResponse, createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { WebSocketServer } from "ws";
import { type EnvelopeType, type PushOptions, createFakeSocket } from "./fake-slack-socket.js";
import { type EventCallbackJson, type FakeFile, type FakeSlackUser, type MessageInput, type SlackContext, messageCallbacks, nextTs, signRequest, slashCommand } from "./slack-events.js";

export type { EventCallbackJson, FakeFile, FakeSlackUser, MessageInput } from "./slack-events.js";

export interface SlackFailure {
  /** HTTP status; default 200 (a platform error). */
  status?: number;
  /** The `error` code of `{ok: false}`. */
  error?: string;
  /** Seconds, for a 429. */
  retryAfter?: number;
}

export interface BotPost {
  seq: number;
  channel: string;
  ts: string;
  threadTs?: string;
  /** As shown: Slack's `&lt;` `&gt;` `&amp;` read back. */
  text: string;
  mrkdwn: boolean;
  /** Every text it showed, the first included. */
  history: string[];
}

export interface SlackCall {
  method: string;
  body: Record<string, string>;
  status: number;
  error?: string;
}

export interface FakeSlackOptions {
  botToken: string;
  appToken: string;
  signingSecret?: string;
  /** Default 10 s (Slack waits a few seconds). */
  redeliverAfterMs?: number;
  postsPerSecond?: number;
  updatesPerMinute?: number;
}

export interface FakeSlackServer {
  origin: string;
  /** The Web API root the SDK is given. */
  apiUrl: string;
  bot: FakeSlackUser & { botId: string };
  teamId: string;
  calls: SlackCall[];
  posts: BotPost[];
  rateLimited: SlackCall[];
  readonly liveConnections: number;
  readonly connectionsOpened: number;
  readonly socket: ReturnType<typeof createFakeSocket>;
  addUser(user: FakeSlackUser): FakeSlackUser;
  addFile(file: { id: string; name: string; mimetype: string; bytes: Buffer }): FakeFile;
  /** What the bot shows in a channel (or one thread of it), oldest first. */
  shown(channel: string, threadTs?: string): string[];
  /** A user's message: its ts, and the callbacks Slack sends for it (not delivered yet). */
  message(input: MessageInput): { ts: string; callbacks: EventCallbackJson[] };
  /** Delivers a user's message over Socket Mode; resolves once every callback was acknowledged. */
  say(input: MessageInput, options?: PushOptions): Promise<{ ts: string; deliveries: number[] }>;
  /** Delivers an envelope over Socket Mode; resolves once acknowledged. */
  push(type: EnvelopeType, payload: unknown, options?: PushOptions): Promise<{ deliveries: number; ackPayload?: unknown }>;
  command(input: { from: FakeSlackUser; channel: string; command: string; text?: string }): Record<string, string>;
  /** Posts a JSON body to a Request URL as Slack does, signed with `secret` (default the signing secret). */
  postEvent(url: string, body: unknown, sign?: { secret?: string; timestamp?: string; retryNum?: number }): Promise<{ status: number; body: string }>;
  /** Posts a slash command's form to a Request URL, signed. */
  postCommand(url: string, form: Record<string, string>): Promise<{ status: number; body: string }>;
  failNext(method: string, failure: SlackFailure): void;
  waitFor<T>(predicate: () => T | undefined | null | false, options?: { timeoutMs?: number; what?: string }): Promise<T>;
  close(): Promise<void>;
}

const unescape = (text: string) => text.replace(/&lt;/g, "<").replace(/&gt;/g, ">").replace(/&amp;/g, "&");

function readBody(incoming: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    incoming.on("data", (chunk: Buffer) => chunks.push(chunk));
    incoming.on("end", () => resolve(Buffer.concat(chunks)));
    incoming.on("error", reject);
  });
}

function fieldsOf(raw: Buffer, contentType: string): Record<string, string> {
  const text = raw.toString("utf8");
  if (contentType.startsWith("application/json")) {
    const parsed = (text ? JSON.parse(text) : {}) as Record<string, unknown>;
    return Object.fromEntries(Object.entries(parsed).map(([key, value]) => [key, typeof value === "string" ? value : JSON.stringify(value)]));
  }
  return Object.fromEntries(new URLSearchParams(text));
}

export async function startFakeSlack(options: FakeSlackOptions): Promise<FakeSlackServer> {
  const context: SlackContext = { teamId: "T0FAKE0001", appId: "A0FAKE0001", botUserId: "U0BOT00001" };
  const bot = { id: context.botUserId, name: "countbot", displayName: "CountBot", botId: "B0BOT00001" };
  const users = new Map<string, FakeSlackUser>([[bot.id, bot]]);
  const files = new Map<string, { file: FakeFile; bytes: Buffer }>();
  const calls: SlackCall[] = [];
  const posts: BotPost[] = [];
  const rateLimited: SlackCall[] = [];
  const failures = new Map<string, SlackFailure[]>();
  const recent = new Map<string, number[]>();
  const tickets = new Set<string>();
  /** Users' messages the fake built, for conversations.replies. */
  const said: Array<{ channel: string; ts: string; threadTs?: string; user: string; text: string }> = [];
  const socket = createFakeSocket({ appId: context.appId, redeliverAfterMs: options.redeliverAfterMs ?? 10_000 });
  let connectionsOpened = 0;
  let seq = 0;
  let origin = "";

  /** A sliding-window limiter: false when the call is over `limit` in `windowMs`. */
  function within(key: string, limit: number, windowMs: number): boolean {
    const now = Date.now();
    const times = (recent.get(key) ?? []).filter((time) => now - time < windowMs);
    if (times.length >= limit) return false;
    times.push(now);
    recent.set(key, times);
    return true;
  }

  function api(method: string, body: Record<string, string>): { status?: number; body: Record<string, unknown>; retryAfter?: number } {
    switch (method) {
      case "auth.test":
        return { body: { ok: true, url: "https://fake.slack.test/", team: "Fake Team", user: bot.name, team_id: context.teamId, user_id: bot.id, bot_id: bot.botId, is_enterprise_install: false } };
      case "users.info": {
        const user = users.get(body.user ?? "");
        if (!user) return { body: { ok: false, error: "user_not_found" } };
        return { body: { ok: true, user: { id: user.id, name: user.name, real_name: user.displayName ?? user.name, is_bot: user.id === bot.id, profile: { display_name: user.displayName ?? "", real_name: user.displayName ?? user.name } } } };
      }
      case "chat.postMessage": {
        const channel = body.channel ?? "";
        if (!/^[CDG][A-Z0-9]+$/.test(channel)) return { body: { ok: false, error: "channel_not_found" } };
        if (typeof body.text !== "string" || body.text === "") return { body: { ok: false, error: "no_text" } };
        if (body.text.length > 40_000) return { body: { ok: false, error: "msg_too_long" } };
        if (!within(`post:${channel}`, options.postsPerSecond ?? 2, 1_000)) return { status: 429, retryAfter: 1, body: { ok: false, error: "ratelimited" } };
        const ts = nextTs();
        const text = unescape(body.text);
        posts.push({ seq: ++seq, channel, ts, ...(body.thread_ts ? { threadTs: body.thread_ts } : {}), text, mrkdwn: body.mrkdwn !== "false", history: [text] });
        return { body: { ok: true, channel, ts, message: { type: "message", user: bot.id, bot_id: bot.botId, text: body.text, ts } } };
      }
      case "chat.update": {
        const post = posts.find((candidate) => candidate.channel === body.channel && candidate.ts === body.ts);
        if (!post) return { body: { ok: false, error: "message_not_found" } };
        if (!within("update", options.updatesPerMinute ?? 60, 60_000)) return { status: 429, retryAfter: 5, body: { ok: false, error: "ratelimited" } };
        post.text = unescape(body.text ?? "");
        post.history.push(post.text);
        return { body: { ok: true, channel: post.channel, ts: post.ts, text: body.text } };
      }
      case "conversations.replies": {
        const all = [
          ...said.map((item) => ({ ...item, bot_id: undefined })),
          ...posts.map((item) => ({ channel: item.channel, ts: item.ts, threadTs: item.threadTs, user: bot.id, text: item.text, bot_id: bot.botId })),
        ].filter((item) => item.channel === body.channel && (item.ts === body.ts || item.threadTs === body.ts));
        const parent = all.find((item) => item.ts === body.ts);
        if (!parent) return { body: { ok: false, error: "thread_not_found" } };
        const thread = [parent, ...all.filter((item) => item !== parent).sort((a, b) => a.ts.localeCompare(b.ts))].slice(0, Number(body.limit ?? 1000));
        return { body: { ok: true, has_more: false, messages: thread.map((item) => ({ type: "message", user: item.user, text: item.text, ts: item.ts, ...(item.threadTs ? { thread_ts: item.threadTs } : {}), ...(item.bot_id ? { bot_id: item.bot_id } : {}) })) } };
      }
      default:
        return { body: { ok: false, error: "unknown_method" } };
    }
  }

  async function handle(incoming: IncomingMessage, response: ServerResponse): Promise<void> {
    const url = new URL(incoming.url ?? "/", "http://127.0.0.1");
    const authorization = incoming.headers.authorization ?? "";
    if (incoming.method === "GET" && url.pathname.startsWith("/files-pri/")) {
      const stored = files.get(url.pathname.split("/")[2]?.replace(/^T[^-]+-/, "") ?? "");
      if (!stored) return void response.writeHead(404).end();
      if (authorization !== `Bearer ${options.botToken}`) return void response.writeHead(200, { "content-type": "text/html" }).end("<html>Sign in to Slack</html>");
      response.writeHead(200, { "content-type": stored.file.mimetype, "content-length": String(stored.bytes.length) });
      return void response.end(stored.bytes);
    }
    const method = url.pathname.replace(/^\/api\//, "");
    const raw = await readBody(incoming);
    const body = fieldsOf(raw, incoming.headers["content-type"] ?? "");
    const call: SlackCall = { method, body, status: 200 };
    calls.push(call);
    const reply = (status: number, payload: Record<string, unknown>, retryAfter?: number) => {
      call.status = status;
      if (payload.ok === false) call.error = String(payload.error);
      if (status === 429) rateLimited.push(call);
      response.writeHead(status, { "content-type": "application/json; charset=utf-8", ...(retryAfter !== undefined ? { "retry-after": String(retryAfter) } : {}) });
      response.end(JSON.stringify(payload));
    };
    if (incoming.method !== "POST" || !url.pathname.startsWith("/api/")) return reply(404, { ok: false, error: "unknown_method" });
    const token = (authorization.startsWith("Bearer ") ? authorization.slice(7) : body.token) ?? "";
    const wanted = method === "apps.connections.open" ? options.appToken : options.botToken;
    if (token === "") return reply(200, { ok: false, error: "not_authed" });
    if (token !== wanted) return reply(200, { ok: false, error: method === "apps.connections.open" && token === options.botToken ? "not_allowed_token_type" : "invalid_auth" });
    const failure = failures.get(method)?.shift();
    if (failure) return reply(failure.status ?? 200, { ok: false, error: failure.error ?? "fatal_error" }, failure.retryAfter);
    if (method === "apps.connections.open") {
      const ticket = randomUUID();
      tickets.add(ticket);
      connectionsOpened += 1;
      return reply(200, { ok: true, url: `${origin.replace(/^http/, "ws")}/link/?ticket=${ticket}&app_id=${context.appId}` });
    }
    const result = api(method, body);
    return reply(result.status ?? 200, result.body, result.retryAfter);
  }

  const server = createServer((incoming, response) => {
    handle(incoming, response).catch((error: unknown) => {
      if (!response.headersSent) response.writeHead(500, { "content-type": "text/plain" });
      response.end(String(error));
    });
  });
  const sockets = new WebSocketServer({ noServer: true });
  server.on("upgrade", (incoming, raw, head) => {
    const url = new URL(incoming.url ?? "/", "http://127.0.0.1");
    if (url.pathname !== "/link/" || !tickets.delete(url.searchParams.get("ticket") ?? "")) {
      raw.end("HTTP/1.1 401 Unauthorized\r\n\r\n");
      return;
    }
    sockets.handleUpgrade(incoming, raw, head, (webSocket) => socket.accept(webSocket));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

  function remember(input: MessageInput, built: { ts: string; callbacks: EventCallbackJson[] }) {
    said.push({ channel: input.channel, ts: built.ts, ...(input.threadTs ? { threadTs: input.threadTs } : {}), user: input.from.id, text: String(built.callbacks[0]!.event.text) });
    return built;
  }

  async function post(url: string, body: string, headers: Record<string, string>): Promise<{ status: number; body: string }> {
    const response = await fetch(url, { method: "POST", headers, body });
    return { status: response.status, body: await response.text() };
  }

  const fake: FakeSlackServer = {
    origin,
    apiUrl: `${origin}/api/`,
    bot,
    teamId: context.teamId,
    calls,
    posts,
    rateLimited,
    socket,
    get liveConnections() {
      return socket.liveConnections;
    },
    get connectionsOpened() {
      return connectionsOpened;
    },
    addUser(user) {
      users.set(user.id, user);
      return user;
    },
    addFile({ id, name, mimetype, bytes }) {
      const url = `${origin}/files-pri/${context.teamId}-${id}/${encodeURIComponent(name)}`;
      const file: FakeFile = { id, name, mimetype, size: bytes.length, url_private: url, url_private_download: `${url}?download=1` };
      files.set(id, { file, bytes });
      return file;
    },
    shown: (channel, threadTs) => posts.filter((item) => item.channel === channel && item.threadTs === threadTs).map((item) => item.text),
    message: (input) => remember(input, messageCallbacks(input, context)),
    async say(input, pushOptions) {
      const { ts, callbacks } = remember(input, messageCallbacks(input, context));
      const answers = await Promise.all(callbacks.map((callback) => socket.push("events_api", callback, pushOptions)));
      return { ts, deliveries: answers.map((answer) => answer.deliveries) };
    },
    push: (type, payload, pushOptions) => socket.push(type, payload, pushOptions),
    command: (input) => slashCommand(input, context),
    postEvent(url, body, sign = {}) {
      const text = JSON.stringify(body);
      const headers = { "content-type": "application/json", ...signRequest(text, sign.secret ?? options.signingSecret ?? "", sign.timestamp), ...(sign.retryNum ? { "x-slack-retry-num": String(sign.retryNum), "x-slack-retry-reason": "http_timeout" } : {}) };
      return post(url, text, headers);
    },
    postCommand(url, form) {
      const text = new URLSearchParams(form).toString();
      return post(url, text, { "content-type": "application/x-www-form-urlencoded", ...signRequest(text, options.signingSecret ?? "") });
    },
    failNext(method, failure) {
      failures.set(method, [...(failures.get(method) ?? []), failure]);
    },
    async waitFor(predicate, waitOptions = {}) {
      const deadline = Date.now() + (waitOptions.timeoutMs ?? 10_000);
      for (;;) {
        const value = predicate();
        if (value) return value;
        if (Date.now() > deadline) throw new Error(`fake Slack: timed out waiting for ${waitOptions.what ?? "a condition"}`);
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    },
    async close() {
      socket.close();
      sockets.close();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
  return fake;
}
