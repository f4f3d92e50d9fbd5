/**
 * The HTTP API (Fastify): health and readiness probes, the browser's login, session control, and
 * the routes the composition root hands it (channels' routes and webhooks, pairing, tasks, tool
 * history, the OpenAI-compatible endpoint, the web console's files). Closed by default: bound
 * beyond loopback it will not start without a bearer token, and with a token every `/api`, `/ws`
 * and `/v1` request must carry it. A route family (`/v1/`) may take more keys and answers its
 * errors in its own shape. Who may call what (origin, token, sign-in limits, `/login`) is
 * access-guard.ts's.
 */
import { BlockList } from "node:net";
import websocket from "@fastify/websocket";
import Fastify, { type FastifyBaseLogger, type FastifyError, type FastifyInstance, LogController } from "fastify";
import type { Logger } from "pino";
import { z } from "zod";
import type { GatewayBus } from "../bus/message-bus.js";
import { ConfigError, errorMessage } from "../errors.js";
import type { ChannelHealthJson } from "../gateway/channel-health.js";
import type { ChannelWebhook } from "../gateway/channel.js";
import { RequestError, parseRequest } from "../gateway/http-request.js";
import { AccessGuard, type Refusal, type RouteFamily } from "./access-guard.js";
import type { AttemptLimits } from "./attempt-limiter.js";
import { lazyRequestLogger } from "./lazy-request-logger.js";
import { securityHeaders } from "./security-headers.js";

/** The `api` section of the config. */
export interface ApiServerConfig {
  host: string;
  port: number;
  /** Bearer token; required when `host` is not a loopback address. */
  token?: string;
  /** Browser origins besides the API's own allowed to change state or open the WebSocket. */
  allowedOrigins?: readonly string[];
  /**
   * Addresses or CIDR ranges of the reverse proxies in front (`api.trustProxy`). Only a request
   * coming from one of them has its `X-Forwarded-For` (the client's address, which the sign-in limit
   * counts by) and `X-Forwarded-Proto` (https: the login cookie is `Secure`) believed.
   */
  trustProxy?: readonly string[];
  /** Failed sign-in attempts allowed (defaults: 10 per client and 100 in all per minute). */
  loginLimits?: AttemptLimits;
}

export interface ReadinessCheck {
  ok: boolean;
  detail?: string;
}

/** What `/ready` reports; 200 when ready and every check is ok, 503 otherwise. */
export interface Readiness {
  ready: boolean;
  checks: Record<string, ReadinessCheck>;
  /** Every channel this process runs, each with its state (one down does not make the process unready). */
  channels?: ChannelHealthJson[];
}

export interface ApiServerOptions {
  bus: Pick<GatewayBus, "requestCancel">;
  config: ApiServerConfig;
  logger: Logger;
  /** Whether this process can do its work (Redis reachable, leases renewing, ...). */
  readiness: () => Promise<Readiness>;
  /** `/ready` answers 503 when the readiness checks take longer. Default 5 s. */
  readinessTimeoutMs?: number;
  /** More routes behind the bearer token: the web channel's, pairing approval, tasks, ... */
  routes?: ReadonlyArray<(scope: FastifyInstance) => void>;
  /** Route families with their own keys and error shape (their routes come in `routes`). */
  families?: readonly RouteFamily[];
  /**
   * Platform webhooks (Telegram posts updates here). They carry their own proof (a secret header,
   * a signature) that the handler checks on the raw body before parsing it, so the bearer token
   * does not apply to them.
   */
  webhooks?: readonly ChannelWebhook[];
  /**
   * Public pages (the web console's files): registered outside the token's scope, since a browser
   * must load the login page before it has a cookie. Only GET and HEAD routes belong here; what the
   * page fetches is behind the token.
   */
  site?: (app: FastifyInstance) => void;
}

export interface ApiServer {
  app: FastifyInstance;
  /** Listens. Throws ConfigError when it would be open to the network without a token. */
  listen(): Promise<{ url: string; port: number }>;
  /** Closes the server (and with it every socket). */
  close(): Promise<void>;
}

export type { Refusal, RouteFamily } from "./access-guard.js";
export { TOKEN_COOKIE, presentedKey } from "./credentials.js";

/** Routes anyone may call: probes for orchestrators and load balancers, login and logout (plus platform webhooks). */
const probeRoutes = ["/health", "/ready", "/login", "/logout"];

const SessionParamsSchema = z.object({
  sessionKey: z
    .string()
    .min(1)
    .max(256)
    .regex(/^[\w:.-]+$/, "letters, digits, _ : . and - only"),
});

// The default for every route: a workflow run's 20k-character goal, each character up to 6 bytes
// once JSON-escaped, fits. Routes that take more say so (the web chat's images, the OpenAI
// endpoint's conversations); larger bodies are refused with 413 while they arrive, unparsed.
const BODY_LIMIT_BYTES = 256 * 1024;
// Longer than any valid chat id or session key, so those get a 400 that names the field.
const MAX_PARAM_LENGTH = 512;

export function createApiServer(options: ApiServerOptions): ApiServer {
  const logger = options.logger.child({ component: "api" });
  const families = options.families ?? [];
  const familyOf = (url: string) => families.find((family) => url.startsWith(family.prefix));
  /** The body of an error answer: the family's shape on its routes, `{ error }` elsewhere. */
  const errorBody = (url: string, refusal: Refusal): unknown => familyOf(url)?.errorBody(refusal) ?? { error: refusal.message };
  const app = createApp(options.config, logger, errorBody);
  void app.register(websocket, { options: { maxPayload: 64 * 1024 } });
  if (options.site) options.site(app);
  // Everything else in one scope registered after the websocket plugin: its onRequest hook must run
  // before ours, or a refused upgrade leaves the socket open.
  void app.register(async (scope) => {
    const webhookRoutes = new Set((options.webhooks ?? []).map((webhook) => webhook.path));
    const access = new AccessGuard({
      logger,
      token: tokenOf(options.config),
      allowedOrigins: options.config.allowedOrigins ?? [],
      ...(options.config.loginLimits ? { loginLimits: options.config.loginLimits } : {}),
      publicRoutes: new Set([...probeRoutes, ...webhookRoutes]),
      webhookRoutes,
      families,
      familyOf,
      errorBody,
    });
    access.guard(scope);
    scope.setNotFoundHandler((request, reply) => {
      const message = `not found: ${request.method} ${request.url.split("?")[0]}`;
      return void reply.code(404).send(errorBody(request.url, { status: 404, message, code: "not_found" }));
    });
    scope.get("/health", async () => ({ status: "ok" }));
    access.registerSignIn(scope);
    registerOwnRoutes(scope, options, logger);
    for (const routes of options.routes ?? []) routes(scope);
    if (options.webhooks?.length) registerWebhooks(scope, options.webhooks);
  });
  return serving(app, options.config, logger);
}

/** The API token, when one is set (blank counts as none). */
function tokenOf(config: ApiServerConfig): string | undefined {
  return config.token?.trim() ? config.token : undefined;
}

/** The Fastify instance: logging, limits, proxies, the error answer's shape, and the security headers. */
function createApp(config: ApiServerConfig, logger: Logger, errorBody: (url: string, refusal: Refusal) => unknown): FastifyInstance {
  // Typed with Fastify's own logger interface, which pino's Logger satisfies (its generics do not).
  const fastifyLogger: FastifyBaseLogger = logger;
  const app: FastifyInstance = Fastify({
    loggerInstance: fastifyLogger,
    logController: new LogController({ disableRequestLogging: true }),
    childLoggerFactory: lazyRequestLogger,
    bodyLimit: BODY_LIMIT_BYTES,
    trustProxy: config.trustProxy?.length ? [...config.trustProxy] : false,
    routerOptions: {
      maxParamLength: MAX_PARAM_LENGTH,
      onMaxParamLength: (_path, _request, response) => {
        response.writeHead(414, { "content-type": "application/json; charset=utf-8" });
        response.end(JSON.stringify({ error: `a path parameter is longer than ${MAX_PARAM_LENGTH} characters` }));
      },
    },
  });
  app.setErrorHandler((error: FastifyError, request, reply) => {
    const status = error.statusCode !== undefined && error.statusCode >= 400 ? error.statusCode : 500;
    if (status >= 500) request.log.error({ err: error, method: request.method, route: request.routeOptions.url }, "request failed");
    // A RequestError's message is written for the client, whatever its status (a 503 saying why).
    let message = status >= 500 && !(error instanceof RequestError) ? "internal error" : error.message;
    if (error.code === "FST_ERR_CTP_BODY_TOO_LARGE" && !message.startsWith("body too large")) {
      message = `body too large: this route takes at most ${request.routeOptions.bodyLimit ?? BODY_LIMIT_BYTES} bytes`;
    }
    void reply.code(status).send(errorBody(request.url, { status, message, error }));
  });
  // text/plain is what a cross-site form or no-cors fetch can send without a preflight: JSON only.
  app.removeContentTypeParser("text/plain");
  addSecurityHeaders(app);
  return app;
}

function addSecurityHeaders(app: FastifyInstance): void {
  const secure = securityHeaders({
    contentSecurityPolicy: {
      useDefaults: true,
      directives: {
        // The API speaks plain HTTP (TLS, if any, ends at a proxy in front): told to upgrade, a
        // browser reaching it by a LAN address would ask for https and load none of the console's files.
        upgradeInsecureRequests: null,
        // Nothing the gateway serves loads from elsewhere (no CDN, no web fonts): bull-board's
        // font link falls back to the system fonts instead of calling out.
        styleSrc: ["'self'", "'unsafe-inline'"],
        fontSrc: ["'self'", "data:"],
      },
    },
  });
  app.addHook("onRequest", (request, reply, done) => {
    secure(reply.raw);
    done();
  });
}

/** The server's own routes behind the token: readiness and session control. */
function registerOwnRoutes(scope: FastifyInstance, options: ApiServerOptions, logger: Logger): void {
  scope.get("/ready", async (_request, reply) => {
    const result = await checkReadiness(options.readiness, options.readinessTimeoutMs ?? 5_000);
    const ready = result.ready && Object.values(result.checks).every((check) => check.ok);
    return reply.code(ready ? 200 : 503).send({ ...result, ready });
  });
  scope.post("/api/sessions/:sessionKey/cancel", async (request, reply) => {
    const { sessionKey } = parseRequest(SessionParamsSchema, request.params, "params");
    await options.bus.requestCancel(sessionKey);
    logger.info({ sessionKey }, "cancel requested");
    return reply.code(202).send({ sessionKey });
  });
}

/**
 * Platform webhooks, in their own scope: the body reaches the handler raw, whatever its type, since
 * a signature is computed over the exact bytes and nothing may be parsed before it is checked.
 */
function registerWebhooks(scope: FastifyInstance, webhooks: readonly ChannelWebhook[]): void {
  void scope.register(async (raw) => {
    raw.removeAllContentTypeParsers();
    raw.addContentTypeParser("*", { parseAs: "buffer" }, (_request, body, done) => done(null, body));
    for (const webhook of webhooks) {
      raw.post(webhook.path, async (request, reply) => {
        const rawBody = Buffer.isBuffer(request.body) ? request.body : Buffer.alloc(0);
        const outcome = await webhook.handle({ headers: request.headers, rawBody });
        return reply.code(outcome.status).send(outcome.body ?? {});
      });
    }
  });
}

/** Listening and closing: refused without a token beyond loopback, closed once however often asked. */
function serving(app: FastifyInstance, config: ApiServerConfig, logger: Logger): ApiServer {
  const token = tokenOf(config);
  let started = false;
  let closed: Promise<void> | undefined;
  return {
    app,
    async listen() {
      if (started) throw new Error("the API server is already listening");
      assertSafeBinding(config.host, token);
      started = true;
      try {
        await app.listen({ host: config.host, port: config.port });
      } catch (error) {
        throw listenError(error, config);
      }
      const address = app.server.address();
      const port = typeof address === "object" && address !== null ? address.port : config.port;
      const url = `http://${config.host.includes(":") ? `[${config.host}]` : config.host}:${port}`;
      logger.info({ url, auth: token !== undefined }, "API listening");
      return { url, port };
    },
    close() {
      closed ??= app.close();
      return closed;
    },
  };
}

const loopback = new BlockList();
loopback.addSubnet("127.0.0.0", 8, "ipv4");
loopback.addAddress("::1", "ipv6");

/** 127.0.0.0/8, ::1 (also IPv4-mapped) and `localhost`. */
export function isLoopbackHost(host: string): boolean {
  const name = host.trim().toLowerCase().replace(/^\[(.*)\]$/, "$1");
  if (name === "localhost") return true;
  try {
    return loopback.check(name, name.includes(":") ? "ipv6" : "ipv4");
  } catch {
    return false; // not an IP address: a host name that may resolve anywhere
  }
}

function assertSafeBinding(host: string, token: string | undefined): void {
  if (token !== undefined || isLoopbackHost(host)) return;
  throw new ConfigError(
    `refusing to serve the API on ${host} without a token: set api.token (or COUNTBOT_API_TOKEN), or bind api.host to 127.0.0.1`,
    "api.token",
  );
}

/** What an operator can act on when the server cannot listen: which address, and the field that sets it. */
function listenError(error: unknown, config: ApiServerConfig): Error {
  const code = (error as NodeJS.ErrnoException).code;
  const where = `${config.host}:${config.port}`;
  if (code === "EADDRINUSE") return new ConfigError(`cannot serve the API on ${where}: the port is already in use (stop what holds it, or set api.port / COUNTBOT_API_PORT)`, "api.port", { cause: error });
  if (code === "EACCES") return new ConfigError(`cannot serve the API on ${where}: permission denied (ports below 1024 need privileges; set api.port / COUNTBOT_API_PORT)`, "api.port", { cause: error });
  if (code === "EADDRNOTAVAIL" || code === "ENOTFOUND") return new ConfigError(`cannot serve the API on ${where}: this machine has no such address (set api.host / COUNTBOT_API_HOST)`, "api.host", { cause: error });
  return error instanceof Error ? error : new Error(String(error));
}

async function checkReadiness(readiness: () => Promise<Readiness>, timeoutMs: number): Promise<Readiness> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<Readiness>((resolve) => {
    timer = setTimeout(() => resolve({ ready: false, checks: { readiness: { ok: false, detail: `no answer within ${timeoutMs} ms` } } }), timeoutMs);
  });
  try {
    return await Promise.race([readiness(), timeout]);
  } catch (error) {
    return { ready: false, checks: { readiness: { ok: false, detail: errorMessage(error) } } };
  } finally {
    clearTimeout(timer);
  }
}
