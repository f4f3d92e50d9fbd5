/**
 * The OpenAI-compatible endpoint: any OpenAI client (the SDKs, curl, chat front ends) talks to the
 * agent, which runs its own tools on the server.
 *
 *   POST /v1/chat/completions   `stream: true` answers in SSE chunks, else one `chat.completion`
 *   GET  /v1/models             `countbot` (the agent) and `team:<name>` for every enabled team
 *   GET  /v1/models/:model
 *
 * A request is a message on the bus like a chat platform's, on the `openai` channel: the session
 * is `openai:<key id>:<session id>`, the session id being the `X-Session-Id` header, else the
 * body's `user`, else `default`, and the key id a hash of the bearer key the request came with, so
 * two keys never share a session. The server keeps the conversation (the session's history):
 * only the last message, the user's, is read. The model `team:<name>` runs that team on the
 * message instead (./team-run.ts); any other model name is the agent.
 *
 * Keys: the API token, and `api.openai.apiKeys`. The API server checks them (a route family:
 * refusals in OpenAI's error shape), and its origin and JSON-only rules hold here as everywhere.
 */
import { createHash, randomUUID } from "node:crypto";
import type { IncomingHttpHeaders } from "node:http";
import type { FastifyInstance, FastifyReply } from "fastify";
import type { Logger } from "pino";
import { z } from "zod";
import { parseCommand } from "../../bus/commands.js";
import type { InboundMessage } from "../../bus/message.js";
import type { MessageBus, Subscription } from "../../bus/message-bus.js";
import { STOP_ACKNOWLEDGEMENT } from "../../gateway/admission.js";
import { parseRequest } from "../../gateway/http-request.js";
import type { WorkflowEngine } from "../../jobs/workflows/engine.js";
import type { TeamCatalog } from "../../jobs/workflows/team-catalog.js";
import { type RouteFamily, presentedKey } from "../server.js";
import { ChunkStream } from "./chunk-stream.js";
import { ClientGoneError, OPENAI_CHANNEL, OpenAiReplies, type Reply } from "./replies.js";
import { TeamRunner, teamNameOf } from "./team-run.js";
import { type AnswerHeader, OpenAiError, SessionIdSchema, completionObject, openAiErrorBody, parseChatRequest, userTurnOf } from "./wire.js";

/** The model name of the agent in `/v1/models`; any name but `team:<name>` reaches it too. */
export const AGENT_MODEL = "countbot";

const ModelParamsSchema = z.object({ model: z.string().min(1) });

/** Clients send the whole conversation each time. */
const MAX_BODY_BYTES = 4 * 1024 * 1024;

export interface OpenAiEndpointOptions {
  bus: Pick<MessageBus, "publishInbound" | "requestCancel" | "consumeOutbound" | "broadcast" | "onBroadcast" | "watchDrafts">;
  teams: Pick<TeamCatalog, "enabled">;
  workflows: Pick<WorkflowEngine, "start" | "get" | "cancel">;
  config: {
    /** Bearer keys besides the API token. */
    apiKeys: readonly string[];
    /** A request without an answer after this long gets a 504. */
    timeoutSeconds: number;
  };
  logger: Logger;
  /** SSE comments while nothing else is sent. Default 15 s. */
  keepAliveMs?: number;
  /** How often a team run's record is read. Default 500 ms. */
  teamPollIntervalMs?: number;
  now?: () => number;
  newId?: () => string;
}

export interface OpenAiEndpoint {
  /** For the API server: `/v1/` with its keys and error shape. */
  family: RouteFamily;
  /** Registers the routes (inside the API server's checked scope). */
  routes(scope: FastifyInstance): void;
  /** Starts taking the agent's replies off the bus. */
  start(): Promise<void>;
  /** Stops; requests still waiting get a 503. */
  stop(): Promise<void>;
  /** Requests waiting for the agent here (tests, metrics). */
  readonly waiting: number;
}

export function createOpenAiEndpoint(options: OpenAiEndpointOptions): OpenAiEndpoint {
  return new OpenAiCompatibleEndpoint(options);
}

/** The endpoint: requests in, each one a turn of the agent (or a team run), the answer out as OpenAI's wire shapes. */
class OpenAiCompatibleEndpoint implements OpenAiEndpoint {
  readonly family: RouteFamily;
  private readonly logger: Logger;
  private readonly now: () => number;
  private readonly newId: () => string;
  private readonly replies: OpenAiReplies;
  private readonly teams: TeamRunner;
  /** When the models were "created", as `/v1/models` says: this endpoint's start. */
  private readonly created: number;
  private running = false;

  constructor(private readonly options: OpenAiEndpointOptions) {
    const { bus, config } = options;
    this.logger = options.logger.child({ component: "openai" });
    this.now = options.now ?? Date.now;
    this.newId = options.newId ?? randomUUID;
    this.replies = new OpenAiReplies({ bus, logger: this.logger, abandonedTtlMs: config.timeoutSeconds * 1000 });
    this.teams = new TeamRunner({ teams: options.teams, workflows: options.workflows, pollIntervalMs: options.teamPollIntervalMs });
    this.created = Math.floor(this.now() / 1000);
    this.family = { prefix: "/v1/", keys: config.apiKeys, errorBody: openAiErrorBody };
  }

  /** An arrow: the API server is handed it on its own, not called on this object. */
  readonly routes = (scope: FastifyInstance): void => {
    scope.post("/v1/chat/completions", { bodyLimit: MAX_BODY_BYTES }, (request, reply) => this.answer(reply, request.headers, request.body));
    scope.get("/v1/models", async () => ({ object: "list", data: (await this.modelNames()).map((id) => this.modelObject(id)) }));
    scope.get("/v1/models/:model", async (request) => {
      const { model } = parseRequest(ModelParamsSchema, request.params, "params");
      if (!(await this.modelNames()).includes(model)) throw new OpenAiError(`model "${model}" does not exist (GET /v1/models lists the models)`, 404, { param: "model", code: "model_not_found" });
      return this.modelObject(model);
    });
  };

  async start(): Promise<void> {
    await this.replies.start();
    this.running = true;
  }

  async stop(): Promise<void> {
    this.running = false;
    await this.replies.stop(new OpenAiError("the gateway is shutting down; send the request again", 503, { type: "server_error", code: "unavailable" }));
  }

  get waiting(): number {
    return this.replies.waiting;
  }

  /** One chat completion: the agent's (or a team's) answer, as one object or as an SSE stream. */
  private async answer(reply: FastifyReply, headers: IncomingHttpHeaders, body: unknown): Promise<void> {
    const request = parseChatRequest(body);
    const text = userTurnOf(request);
    const key = presentedKey(headers);
    const sessionKey = `${OPENAI_CHANNEL}:${keyIdOf(key)}:${sessionIdOf(headers, request.user)}`;
    const header: AnswerHeader = { id: `chatcmpl-${this.newId()}`, created: Math.floor(this.now() / 1000), model: request.model };
    const stream = request.stream === true ? new ChunkStream(reply, { header, includeUsage: request.stream_options?.include_usage === true, keepAliveMs: this.options.keepAliveMs }) : undefined;
    const { signal, release } = this.deadline(reply);
    try {
      // Anything refused before the answer starts is an HTTP error (a team that does not exist, a bus that is down).
      const team = teamNameOf(request.model);
      const pending = team === undefined ? (await this.askAgent(sessionKey, keyIdOf(key), text, signal, (delta) => stream?.text(delta))).reply : this.teams.result(await this.teams.start(team, text), signal);
      if (!stream) {
        const result = await pending;
        return void reply.send(completionObject(header, result.content, result.usage));
      }
      stream.open();
      try {
        const result = await pending;
        stream.finish(result.content, result.usage);
      } catch (error) {
        if (!(error instanceof ClientGoneError)) stream.fail(errorBodyOf(error, this.logger));
      }
    } catch (error) {
      if (error instanceof ClientGoneError) return void reply.hijack();
      throw error;
    } finally {
      release();
    }
  }

  /** Aborted when the answer takes longer than `timeoutSeconds` (504) or the client goes away; `release` once answered. */
  private deadline(reply: FastifyReply): { signal: AbortSignal; release: () => void } {
    const { timeoutSeconds } = this.options.config;
    const abort = new AbortController();
    const timeout = setTimeout(() => {
      abort.abort(new OpenAiError(`no answer within ${timeoutSeconds} s (api.openai.timeoutSeconds)`, 504, { type: "server_error", code: "timeout" }));
    }, timeoutSeconds * 1000);
    const onClose = () => {
      if (!reply.raw.writableFinished) abort.abort(new ClientGoneError("the client went away"));
    };
    reply.raw.once("close", onClose);
    return {
      signal: abort.signal,
      release: () => {
        clearTimeout(timeout);
        reply.raw.off("close", onClose);
      },
    };
  }

  /** Queues the message as its own turn; the promise of its reply (wrapped: an async function would wait for it). */
  private async askAgent(sessionKey: string, senderId: string, text: string, signal: AbortSignal, onText: (delta: string) => void): Promise<{ reply: Promise<Reply> }> {
    const { bus } = this.options;
    if (!this.running) throw new OpenAiError("the endpoint is not running", 503, { type: "server_error", code: "unavailable" });
    // Acted on at once, as every channel does: queued, it would wait for the turn it stops.
    const command = parseCommand(text);
    if (command === "stop") {
      await bus.requestCancel(sessionKey);
      return { reply: Promise.resolve({ content: STOP_ACKNOWLEDGEMENT }) };
    }
    const id = `oai-${this.newId()}`;
    const expected = this.replies.expect(id, sessionKey, { signal, onText });
    const message: InboundMessage = {
      id,
      channel: OPENAI_CHANNEL,
      chatId: sessionKey.slice(OPENAI_CHANNEL.length + 1),
      senderId,
      content: text,
      media: [],
      mentions: [],
      receivedAt: this.now(),
      chatType: "private",
      ...(command === undefined ? {} : { command }),
      // The client waits for the answer to this message alone.
      metadata: { ownTurn: true },
    };
    // The client watches this chat's drafts (streamed, or seen running for a cancel) until its answer.
    let watching: Subscription | undefined;
    try {
      watching = await bus.watchDrafts(OPENAI_CHANNEL, message.chatId);
      await bus.publishInbound(message);
      const audience = watching;
      void expected.reply.then(
        () => audience.close(),
        () => audience.close(),
      );
    } catch (error) {
      await watching?.close().catch(() => undefined);
      expected.forget();
      this.logger.warn({ err: error, sessionKey }, "an OpenAI request could not be queued");
      throw new OpenAiError("the message could not be queued; send it again", 503, { type: "server_error", code: "unavailable" });
    }
    this.logger.debug({ sessionKey, message: id }, "OpenAI request queued");
    return { reply: expected.reply };
  }

  private async modelNames(): Promise<string[]> {
    return [AGENT_MODEL, ...(await this.teams.modelNames())];
  }

  private modelObject(id: string) {
    return { id, object: "model" as const, created: this.created, owned_by: "countbot" };
  }
}

/**
 * A stable id of the key (never the key): a hash, so sessions of different keys stay apart and
 * the key does not show in session keys, logs or the store. `local`: a request with no key (an
 * API without a token, on loopback).
 */
function keyIdOf(key: string | undefined): string {
  return key === undefined ? "local" : `k${createHash("sha256").update(key, "utf8").digest("hex").slice(0, 16)}`;
}

/** The `X-Session-Id` header, else the body's `user`, else `default`. */
function sessionIdOf(headers: IncomingHttpHeaders, user: string | undefined): string {
  const raw = headers["x-session-id"];
  const header = Array.isArray(raw) ? raw[0] : raw;
  if (header === undefined || header === "") return user ?? "default";
  const parsed = SessionIdSchema.safeParse(header);
  if (!parsed.success) throw new OpenAiError(`X-Session-Id: ${parsed.error.issues[0]?.message ?? "invalid"}`, 400, { param: "X-Session-Id", code: "invalid_value" });
  return parsed.data;
}

/** What a stream that fails after it opened ends with. */
function errorBodyOf(error: unknown, logger: Logger): unknown {
  if (error instanceof OpenAiError) return openAiErrorBody({ status: error.statusCode, message: error.message, error });
  logger.error({ err: error }, "an OpenAI request failed");
  return openAiErrorBody({ status: 500, message: "internal error" });
}
