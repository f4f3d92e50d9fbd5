/**
 * The tool conversation history (each tool call a session's agent made, cut and redacted), queryable
 * per session:
 * `GET /api/sessions/:sessionKey/tool-history?tool=&limit=` lists the session's tool calls, newest first.
 */
import type { FastifyInstance } from "fastify";
import { z } from "zod";
import type { ToolHistory } from "../tools/tool-history.js";
import { parseRequest } from "../gateway/http-request.js";

const ParamsSchema = z.object({
  sessionKey: z
    .string()
    .min(1)
    .max(256)
    .regex(/^[\w.-]+:[\w:.@-]+$/, "a session key `channel:chat_id`"),
});

const QuerySchema = z.strictObject({
  tool: z.string().min(1).max(64).optional(),
  limit: z.coerce.number().int().min(1).max(1_000).default(100),
});

export function registerToolHistoryRoutes(scope: FastifyInstance, history: Pick<ToolHistory, "list">): void {
  scope.get("/api/sessions/:sessionKey/tool-history", async (request) => {
    const { sessionKey } = parseRequest(ParamsSchema, request.params, "params");
    const query = parseRequest(QuerySchema, request.query, "query");
    const entries = await history.list(sessionKey, { tool: query.tool, limit: query.limit });
    return entries.map((entry) => ({
      at: new Date(entry.at).toISOString(),
      tool: entry.tool,
      arguments: entry.arguments,
      user_message: entry.userMessage,
      result: entry.result,
      duration_ms: entry.durationMs,
      success: entry.success,
    }));
  });
}
