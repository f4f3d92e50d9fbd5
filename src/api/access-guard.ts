/**
 * Who may use the API (server.ts), checked on every request before its route runs, in this order:
 *
 * 1. Origin: a browser on another site must not drive the API, token or not (a page the operator
 *    visits can reach loopback). A request that changes state (or opens the WebSocket) from a
 *    browser must come from the API's own origin or one in `api.allowedOrigins`; non-browser
 *    clients send no Origin and pass on to the token. Platform webhooks carry their own proof.
 * 2. Token: every route but the public ones (probes, login, webhooks) takes the API token, as a
 *    Bearer header or the cookie `/login` sets; a route family (`/v1/`) also takes its own keys and
 *    answers in its own shape. Checked on the matched route, not the raw URL, so no spelling of a
 *    path can skip the check or reach another route with a family's key.
 * 3. Sign-in limits: a request that presents a token is a sign-in attempt, refused with 429 while
 *    its address (or every address) failed too often (attempt-limiter.ts), counted when wrong.
 *
 * The browser's sign-in (`/login`, `/logout`) lives here too: it turns the token into that cookie
 * under the same limits.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import type { Logger } from "pino";
import { z } from "zod";
import { parseRequest } from "../gateway/http-request.js";
import { type AttemptLimiter, type AttemptLimits, type AttemptVerdict, createAttemptLimiter } from "./attempt-limiter.js";
import { LOGIN_MAX_AGE_S, bearerMatches, bearerOf, cookieMatches, cookieTokenOf, digest, tokenCookie, tokenMatches } from "./credentials.js";

/** An error answer about to be sent. */
export interface Refusal {
  status: number;
  message: string;
  /** A short machine-readable reason: `invalid_api_key`, `origin_not_allowed`, `not_found`, ... */
  code?: string;
  error?: unknown;
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

export interface AccessGuardOptions {
  logger: Logger;
  /** The API token; absent: no token at all, a loopback-only API. */
  token: string | undefined;
  /** Browser origins besides the API's own allowed to change state or open the WebSocket. */
  allowedOrigins: readonly string[];
  /** Failed sign-in attempts allowed. */
  loginLimits?: AttemptLimits;
  /** Routes anyone may call: probes, login and logout, platform webhooks. */
  publicRoutes: ReadonlySet<string>;
  /** Platform webhooks: no origin check either. */
  webhookRoutes: ReadonlySet<string>;
  families: readonly RouteFamily[];
  /** The route family a URL (or route) belongs to. */
  familyOf: (url: string) => RouteFamily | undefined;
  /** The body of an error answer, in the shape of the URL's family. */
  errorBody: (url: string, refusal: Refusal) => unknown;
}

const LoginQuerySchema = z.object({ token: z.string().min(1).max(512) });
/** The web console's sign-in form posts the token as JSON, so it stays out of the address bar and the history. */
const LoginBodySchema = z.strictObject({ token: z.string().min(1).max(512) });
const LOGIN_BODY_LIMIT_BYTES = 4 * 1024;

/** The checks of the header for one API scope, and its sign-in routes, sharing one attempt limiter. */
export class AccessGuard {
  private readonly expected: Buffer | undefined;
  private readonly familyKeys: Map<RouteFamily, Buffer[]>;
  private readonly allowedOrigins: ReadonlySet<string>;
  private readonly attempts: AttemptLimiter;

  constructor(private readonly options: AccessGuardOptions) {
    const { token, families, logger } = options;
    this.expected = token === undefined ? undefined : digest(token);
    this.familyKeys = new Map(families.map((family) => [family, (family.keys ?? []).map(digest)]));
    this.allowedOrigins = new Set(options.allowedOrigins);
    this.attempts = createAttemptLimiter({
      ...options.loginLimits,
      onLimited: ({ scope: limit, client, failures, windowMs }) =>
        logger.warn({ limit, client, failures, windowSeconds: windowMs / 1000 }, limit === "client" ? "failed sign-in attempts from one address reached the limit: refusing its tokens until the window ends" : "failed sign-in attempts from all addresses reached the limit: refusing tokens from clients not signed in recently until the window ends"),
    });
  }

  /** Adds the origin check, then the token check, to every request of the scope. */
  guard(scope: FastifyInstance): void {
    scope.addHook("onRequest", async (request, reply) => this.checkOrigin(request, reply));
    scope.addHook("onRequest", async (request, reply) => this.checkToken(request, reply));
  }

  /**
   * A browser signs in once: the token (from the login URL `countbot start` prints) becomes an
   * HttpOnly, SameSite=Strict cookie that the API and the WebSocket accept like the bearer header.
   * Secure when the request came over TLS (to a trusted proxy: api.trustProxy).
   */
  registerSignIn(scope: FastifyInstance): void {
    const { token } = this.options;
    scope.get("/login", { bodyLimit: LOGIN_BODY_LIMIT_BYTES }, async (request, reply) => {
      const { token: given } = parseRequest(LoginQuerySchema, request.query, "query");
      if (token === undefined) return reply.redirect("/", 303);
      return this.signIn(request, reply, given, "wrong token") ?? reply.redirect("/", 303);
    });
    // The same for the console's form; a state change, so another site's page gets 403 first.
    scope.post("/login", { bodyLimit: LOGIN_BODY_LIMIT_BYTES }, async (request, reply) => {
      const { token: given } = parseRequest(LoginBodySchema, request.body, "body");
      if (token === undefined) return reply.code(204).send();
      return this.signIn(request, reply, given, "token: wrong token") ?? reply.code(204).send();
    });
    scope.post("/logout", async (request, reply) => reply.header("set-cookie", tokenCookie("", 0, request.protocol)).code(204).send());
  }

  /** Rule 1: a browser on another site may not change state here. */
  private checkOrigin(request: FastifyRequest, reply: FastifyReply): FastifyReply | undefined {
    const route = request.routeOptions.url;
    if (route !== undefined && this.options.webhookRoutes.has(route)) return undefined;
    const origin = request.headers.origin;
    if (origin === undefined || !changesState(request.method, request.headers.upgrade)) return undefined;
    if (isAllowedOrigin(origin, request.headers.host, this.allowedOrigins)) return undefined;
    this.options.logger.warn({ origin, method: request.method, route }, "cross-origin request refused");
    const message = `origin ${origin} may not use this API (api.allowedOrigins lists the ones that may)`;
    return reply.code(403).send(this.options.errorBody(request.url, { status: 403, message, code: "origin_not_allowed" }));
  }

  /**
   * Rules 2 and 3. An unknown path under a family's prefix is refused like its routes, so a wrong
   * key cannot tell which paths exist.
   */
  private checkToken(request: FastifyRequest, reply: FastifyReply): FastifyReply | undefined {
    const { expected, attempts } = this;
    const route = request.routeOptions.url;
    if (route !== undefined && this.options.publicRoutes.has(route)) return undefined;
    const family = this.options.familyOf(route ?? request.url);
    const keys = [...(expected ? [expected] : []), ...((family && this.familyKeys.get(family)) ?? [])];
    if (keys.length === 0) return undefined; // no token at all: a loopback-only API (assertSafeBinding)
    const presented = bearerOf(request.headers.authorization) !== undefined || (expected !== undefined && cookieTokenOf(request.headers.cookie) !== undefined);
    if (presented) {
      const verdict = attempts.check(request.ip);
      if (!verdict.allowed) return this.tooMany(request.url, reply, verdict);
    }
    if (keys.some((key) => bearerMatches(request.headers.authorization, key)) || (expected && cookieMatches(request.headers.cookie, expected))) {
      attempts.succeeded(request.ip);
      return undefined;
    }
    if (presented) attempts.failed(request.ip);
    const message = family ? "missing or wrong API key (send it as `Authorization: Bearer <key>`)" : "missing or wrong bearer token";
    return reply.code(401).header("www-authenticate", 'Bearer realm="countbot"').send(this.options.errorBody(request.url, { status: 401, message, code: "invalid_api_key" }));
  }

  /** Checks the token a browser signs in with and sets the cookie; a reply when refused, undefined when signed in. */
  private signIn(request: FastifyRequest, reply: FastifyReply, given: string, wrong: string): FastifyReply | undefined {
    const verdict = this.attempts.check(request.ip);
    if (!verdict.allowed) return this.tooMany(request.url, reply, verdict);
    if (!tokenMatches(given, this.expected!)) {
      this.attempts.failed(request.ip);
      return reply.code(401).send({ error: wrong });
    }
    this.attempts.succeeded(request.ip);
    return void reply.header("set-cookie", tokenCookie(encodeURIComponent(given), LOGIN_MAX_AGE_S, request.protocol)).header("cache-control", "no-store");
  }

  /** A 429 for a client that may not present a token now: before the token is compared. */
  private tooMany(url: string, reply: FastifyReply, verdict: AttemptVerdict & { allowed: false }): FastifyReply {
    const message = `too many failed sign-in attempts ${verdict.scope === "client" ? "from this address" : "in all"}: try again in ${verdict.retryAfterSeconds} s`;
    return reply.code(429).header("retry-after", String(verdict.retryAfterSeconds)).send(this.options.errorBody(url, { status: 429, message, code: "rate_limit_exceeded" }));
  }
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
