/**
 * The HTTP API (Fastify): health and readiness probes, the browser's login, session control, and
 * the routes the composition root hands it (channels' routes and webhooks, pairing, tasks, tool
 * history, the OpenAI-compatible endpoint, the web console's files). Closed by default: bound
 * beyond loopback it will not start without a bearer token, and with a token every `/api`, `/ws`
 * and `/v1` request must carry it. A route family (`/v1/`) may take more keys and answers its
 * errors in its own shape.
 */
import { BlockList } from "node:net";
import websocket from "@fastify/websocket";
import Fastify, { type FastifyBaseLogger, type FastifyError, type FastifyInstance, type FastifyReply, type FastifyRequest, LogController } from "fastify";
import type { Logger } from "pino";
import { z } from "zod";
import type { GatewayBus } from "../bus/message-bus.js";
import { ConfigError, errorMessage } from "../errors.js";
import type { ChannelHealthJson } from "../gateway/channel-health.js";
import type { ChannelWebhook } from "../gateway/channel.js";
import { RequestError, parseRequest } from "../gateway/http-request.js";
import { type AttemptLimits, type AttemptVerdict, createAttemptLimiter } from "./attempt-limiter.js";
import { LOGIN_MAX_AGE_S, bearerMatches, bearerOf, cookieMatches, cookieTokenOf, digest, tokenCookie, tokenMatches } from "./credentials.js";
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

/**
 * Routes under one path prefix that speak another API's dialect (the OpenAI-compatible `/v1/`):
 * the same origin, token and content-type rules, but their own bearer keys besides the API token,
 * and every error (refusals, bad bodies, unknown paths, failures) in their own shape.
 */
export interface RouteFamily {
  /** Path prefix, e.g. `/v1/`. */
  prefix: string;
  /** Bearer keys these routes take besides the API token (secrets). */
  keys?: readonly string[];
  /** The JSON body of an error answer; `error` is what was thrown, when something was. */
  errorBody(refusal: Refusal): unknown;
}

/** An error answer about to be sent. */
export interface Refusal {
  status: number;
  message: string;
  /** A short machine-readable reason: `invalid_api_key`, `origin_not_allowed`, `not_found`, ... */
  code?: string;
  error?: unknown;
}

export { TOKEN_COOKIE, presentedKey } from "./credentials.js";

/** Routes anyone may call: probes for orchestrators and load balancers, login and logout (plus platform webhooks). */
const probeRoutes = ["/health", "/ready", "/login", "/logout"];

const LoginQuerySchema = z.object({ token: z.string().min(1).max(512) });
/** The web console's sign-in form posts the token as JSON, so it stays out of the address bar and the history. */
const LoginBodySchema = z.strictObject({ token: z.string().min(1).max(512) });

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
const LOGIN_BODY_LIMIT_BYTES = 4 * 1024;
// Longer than any valid chat id or session key, so those get a 400 that names the field.
const MAX_PARAM_LENGTH = 512;

export function createApiServer(options: ApiServerOptions): ApiServer {
  const { bus, config } = options;
  const logger = options.logger.child({ component: "api" });
  const token = config.token?.trim() ? config.token : undefined;
  const webhookRoutes = new Set((options.webhooks ?? []).map((webhook) => webhook.path));
  const publicRoutes = new Set([...probeRoutes, ...webhookRoutes]);
  const allowedOrigins = new Set(config.allowedOrigins ?? []);
  const families = options.families ?? [];
  const familyOf = (url: string) => families.find((family) => url.startsWith(family.prefix));
  /** The body of an error answer: the family's shape on its routes, `{ error }` elsewhere. */
  const errorBody = (url: string, refusal: Refusal): unknown => familyOf(url)?.errorBody(refusal) ?? { error: refusal.message };

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
  void app.register(websocket, { options: { maxPayload: 64 * 1024 } });
  if (options.site) options.site(app);
  // Everything else in one scope registered after the websocket plugin: its onRequest hook must run
  // before ours, or a refused upgrade leaves the socket open.
  void app.register(async (scope) => {
    // First: a browser on another site must not drive the API, token or not (a page the operator
    // visits can reach loopback). Non-browser clients send no Origin and pass to the token check.
    scope.addHook("onRequest", async (request, reply) => {
      const route = request.routeOptions.url;
      if (route !== undefined && webhookRoutes.has(route)) return;
      const origin = request.headers.origin;
      if (origin === undefined || !changesState(request.method, request.headers.upgrade)) return;
      if (isAllowedOrigin(origin, request.headers.host, allowedOrigins)) return;
      logger.warn({ origin, method: request.method, route }, "cross-origin request refused");
      const message = `origin ${origin} may not use this API (api.allowedOrigins lists the ones that may)`;
      return reply.code(403).send(errorBody(request.url, { status: 403, message, code: "origin_not_allowed" }));
    });
    const expected = token === undefined ? undefined : digest(token);
    const familyKeys = new Map(families.map((family) => [family, (family.keys ?? []).map(digest)]));
    const attempts = createAttemptLimiter({
      ...config.loginLimits,
      onLimited: ({ scope: limit, client, failures, windowMs }) =>
        logger.warn({ limit, client, failures, windowSeconds: windowMs / 1000 }, limit === "client" ? "failed sign-in attempts from one address reached the limit: refusing its tokens until the window ends" : "failed sign-in attempts from all addresses reached the limit: refusing tokens from clients not signed in recently until the window ends"),
    });
    /** A 429 for a client that may not present a token now: before the token is compared. */
    const tooMany = (url: string, reply: FastifyReply, verdict: AttemptVerdict & { allowed: false }) => {
      const message = `too many failed sign-in attempts ${verdict.scope === "client" ? "from this address" : "in all"}: try again in ${verdict.retryAfterSeconds} s`;
      return reply.code(429).header("retry-after", String(verdict.retryAfterSeconds)).send(errorBody(url, { status: 429, message, code: "rate_limit_exceeded" }));
    };
    // On the matched route, not the raw URL: no spelling of a path can skip the check, or reach
    // another route with a family's key. An unknown path under a family's prefix is refused like
    // its routes, so a wrong key cannot tell which paths exist. A request that presents a token
    // (header or cookie) is a sign-in attempt: limited, and counted when the token is wrong.
    scope.addHook("onRequest", async (request, reply) => {
      const route = request.routeOptions.url;
      if (route !== undefined && publicRoutes.has(route)) return;
      const family = familyOf(route ?? request.url);
      const keys = [...(expected ? [expected] : []), ...((family && familyKeys.get(family)) ?? [])];
      if (keys.length === 0) return; // no token at all: a loopback-only API (assertSafeBinding)
      const presented = bearerOf(request.headers.authorization) !== undefined || (expected !== undefined && cookieTokenOf(request.headers.cookie) !== undefined);
      if (presented) {
        const verdict = attempts.check(request.ip);
        if (!verdict.allowed) return tooMany(request.url, reply, verdict);
      }
      if (keys.some((key) => bearerMatches(request.headers.authorization, key)) || (expected && cookieMatches(request.headers.cookie, expected))) {
        attempts.succeeded(request.ip);
        return;
      }
      if (presented) attempts.failed(request.ip);
      const message = family ? "missing or wrong API key (send it as `Authorization: Bearer <key>`)" : "missing or wrong bearer token";
      return reply.code(401).header("www-authenticate", 'Bearer realm="countbot"').send(errorBody(request.url, { status: 401, message, code: "invalid_api_key" }));
    });
    scope.setNotFoundHandler((request, reply) => {
      const message = `not found: ${request.method} ${request.url.split("?")[0]}`;
      return void reply.code(404).send(errorBody(request.url, { status: 404, message, code: "not_found" }));
    });

    scope.get("/health", async () => ({ status: "ok" }));

    // A browser signs in once: the token (from the login URL `countbot start` prints) becomes an
    // HttpOnly, SameSite=Strict cookie that the API and the WebSocket accept like the bearer header.
    // Secure when the request came over TLS (to a trusted proxy: api.trustProxy).
    const signIn = (request: FastifyRequest, reply: FastifyReply, given: string, wrong: string): FastifyReply | undefined => {
      const verdict = attempts.check(request.ip);
      if (!verdict.allowed) return tooMany(request.url, reply, verdict);
      if (!tokenMatches(given, expected!)) {
        attempts.failed(request.ip);
        return reply.code(401).send({ error: wrong });
      }
      attempts.succeeded(request.ip);
      return void reply.header("set-cookie", tokenCookie(encodeURIComponent(given), LOGIN_MAX_AGE_S, request.protocol)).header("cache-control", "no-store");
    };

    scope.get("/login", { bodyLimit: LOGIN_BODY_LIMIT_BYTES }, async (request, reply) => {
      const { token: given } = parseRequest(LoginQuerySchema, request.query, "query");
      if (token === undefined) return reply.redirect("/", 303);
      return signIn(request, reply, given, "wrong token") ?? reply.redirect("/", 303);
    });

    // The same for the console's form; a state change, so another site's page gets 403 above.
    scope.post("/login", { bodyLimit: LOGIN_BODY_LIMIT_BYTES }, async (request, reply) => {
      const { token: given } = parseRequest(LoginBodySchema, request.body, "body");
      if (token === undefined) return reply.code(204).send();
      return signIn(request, reply, given, "token: wrong token") ?? reply.code(204).send();
    });

    scope.post("/logout", async (request, reply) => reply.header("set-cookie", tokenCookie("", 0, request.protocol)).code(204).send());

    scope.get("/ready", async (_request, reply) => {
      const result = await checkReadiness(options.readiness, options.readinessTimeoutMs ?? 5_000);
      const ready = result.ready && Object.values(result.checks).every((check) => check.ok);
      return reply.code(ready ? 200 : 503).send({ ...result, ready });
    });

    scope.post("/api/sessions/:sessionKey/cancel", async (request, reply) => {
      const { sessionKey } = parseRequest(SessionParamsSchema, request.params, "params");
      await bus.requestCancel(sessionKey);
      logger.info({ sessionKey }, "cancel requested");
      return reply.code(202).send({ sessionKey });
    });

    for (const routes of options.routes ?? []) routes(scope);
    if (options.webhooks?.length) {
      // Their own scope: the body reaches the handler raw, whatever its type, since a signature is
      // computed over the exact bytes and nothing may be parsed before it is checked.
      void scope.register(async (webhooks) => {
        webhooks.removeAllContentTypeParsers();
        webhooks.addContentTypeParser("*", { parseAs: "buffer" }, (_request, body, done) => done(null, body));
        for (const webhook of options.webhooks ?? []) {
          webhooks.post(webhook.path, async (request, reply) => {
            const rawBody = Buffer.isBuffer(request.body) ? request.body : Buffer.alloc(0);
            const outcome = await webhook.handle({ headers: request.headers, rawBody });
            return reply.code(outcome.status).send(outcome.body ?? {});
          });
        }
      });
    }
  });

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

/** A request a cross-site page could use to act: anything but a read, and every WebSocket upgrade. */
function changesState(method: string, upgrade: string | undefined): boolean {
  return upgrade !== undefined || !["GET", "HEAD", "OPTIONS"].includes(method);
}

/** The API's own origin (same host as the request was sent to), or one the operator allowed. */
function isAllowedOrigin(origin: string, host: string | undefined, allowed: ReadonlySet<string>): boolean {
  if (allowed.has(origin)) return true;
  if (host === undefined) return false;
  try {
    const parsed = new URL(origin);
    return (parsed.protocol === "http:" || parsed.protocol === "https:") && parsed.host.toLowerCase() === host.toLowerCase();
  } catch {
    return false; // "null" (a sandboxed frame, a file:// page) and other non-URLs
  }
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
