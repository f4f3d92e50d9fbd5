/**
 * The sessions API, read-only: the chats the deployment knows, by channel, with their history and
 * long-term memory (what the web console's Sessions view and the chat page's first screen show).
 *
 *   GET /api/sessions?channel=&profile=&limit=   newest activity first: `{ key, channel, account, profile, chatId, createdAt, updatedAt, generation }`
 *                                             (`account`: the platform account, `default` for a section without accounts;
 *                                             `profile`: the agent profile the routing rules give the chat, sender rules aside)
 *   GET /api/sessions/:sessionKey             the session with its current history (an unknown key: an empty one)
 *   GET /api/sessions/:sessionKey/memory      `{ key, scope, location, content, people }`; in global scope every key names the one
 *                                             memory; `people`: the person memory of everyone who spoke in the history,
 *                                             `{ person, location, content }` each (`person` as their label shows it, `discord:123`)
 *
 * Register it inside the scope that checks the bearer token: histories are what users said.
 */
import type { FastifyInstance } from "fastify";
import { z } from "zod";
import type { MemoryStore } from "../memory/memory.js";
import type { PersonMemory } from "../memory/person-memory.js";
import { splitChannel } from "../config/accounts.js";
import { parseRequest } from "../gateway/http-request.js";
import type { SessionMeta, SessionStore } from "../store/store.js";

export interface SessionRoutesOptions {
  sessions: Pick<SessionStore, "list" | "load">;
  memory: Pick<MemoryStore, "scope" | "location" | "read">;
  /** Person memory; absent, `people` is always empty. */
  people?: PersonMemory;
  /** The agent profile a chat is routed to (src/config/agents.ts). Default: `default` for every chat. */
  profileOf?: (channel: string, chatId: string) => string;
}

const emptyAsMissing = (value: unknown) => (value === "" ? undefined : value);

const SessionListQuerySchema = z.strictObject({
  channel: z.preprocess(emptyAsMissing, z.string().regex(/^[\w-]{1,64}(\.[\w-]{1,32})?$/, "a channel name (letters, digits, _ and -; an account after a dot)").optional()),
  profile: z.preprocess(emptyAsMissing, z.string().regex(/^[\w-]{1,32}$/, "an agent profile id").optional()),
  limit: z.preprocess(
    emptyAsMissing,
    z
      .string()
      .regex(/^\d+$/, "a whole number")
      .transform(Number)
      .pipe(z.number().int().min(1).max(1_000))
      .default(200),
  ),
});

const SessionParamsSchema = z.object({
  sessionKey: z
    .string()
    .min(1)
    .max(256)
    .regex(/^[\w.-]+:[\w:.@-]+$/, "a session key `channel:chat_id`"),
});

/** `telegram:42` → channel `telegram`, chat `42`; a chat id may hold `:` itself. */
function sessionJson(meta: SessionMeta, profileOf: (channel: string, chatId: string) => string = () => "default") {
  const separator = meta.key.indexOf(":");
  const channel = separator > 0 ? meta.key.slice(0, separator) : meta.key;
  const chatId = separator > 0 ? meta.key.slice(separator + 1) : "";
  return {
    key: meta.key,
    channel,
    account: splitChannel(channel).account,
    profile: profileOf(channel, chatId),
    chatId,
    createdAt: new Date(meta.createdAt).toISOString(),
    updatedAt: new Date(meta.updatedAt).toISOString(),
    generation: meta.generation,
  };
}

export function registerSessionRoutes(scope: FastifyInstance, options: SessionRoutesOptions): void {
  const { sessions, memory } = options;

  scope.get("/api/sessions", async (request) => {
    const query = parseRequest(SessionListQuerySchema, request.query, "query");
    const found = (await sessions.list())
      .map((meta) => sessionJson(meta, options.profileOf))
      .filter((session) => (query.channel === undefined || session.channel === query.channel) && (query.profile === undefined || session.profile === query.profile))
      .sort((a, b) => b.updatedAt.localeCompare(a.updatedAt) || a.key.localeCompare(b.key));
    return found.slice(0, query.limit);
  });

  scope.get("/api/sessions/:sessionKey", async (request) => {
    const { sessionKey } = parseRequest(SessionParamsSchema, request.params, "params");
    const { meta, history } = await sessions.load(sessionKey);
    return {
      ...sessionJson({ ...meta, key: sessionKey }, options.profileOf),
      history: history.map((entry) => ({
        role: entry.role,
        content: entry.content,
        at: new Date(entry.at).toISOString(),
        ...(entry.model === undefined ? {} : { model: entry.model }),
        ...(entry.usage === undefined ? {} : { usage: entry.usage }),
      })),
    };
  });

  scope.get("/api/sessions/:sessionKey/memory", async (request) => {
    const { sessionKey } = parseRequest(SessionParamsSchema, request.params, "params");
    const { history } = await sessions.load(sessionKey);
    const speakers = [...new Set(history.flatMap((entry) => entry.speakers ?? []))];
    const people = options.people;
    const personal = people
      ? await Promise.all(
          speakers.map(async (person) => {
            const key = people.keyOf(person);
            return { person, location: people.store.location(key), content: await people.store.read(key) };
          }),
        )
      : [];
    return { key: sessionKey, scope: memory.scope, location: memory.location(sessionKey), content: await memory.read(sessionKey), people: personal };
  });
}
