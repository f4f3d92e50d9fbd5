/**
 * The HTTP side of DM pairing: `POST /api/pairing/:code/approve`, the API twin of
 * `countbot pairing approve CODE`. Register it inside the scope that checks the bearer token:
 * approving lets a stranger talk to the bot.
 */
import type { FastifyInstance } from "fastify";
import { z } from "zod";
import type { Store } from "../store/store.js";
import { RequestError, parseRequest } from "../gateway/http-request.js";

const PairingParamsSchema = z.object({
  code: z
    .string()
    .min(1)
    .max(32)
    .regex(/^[A-Za-z0-9 -]+$/, "letters, digits, spaces and - only"),
});

export function registerPairingRoutes(app: FastifyInstance, store: Pick<Store, "pairing">, options: { now?: () => number } = {}): void {
  const now = options.now ?? Date.now;
  app.post("/api/pairing/:code/approve", async (request) => {
    const { code } = parseRequest(PairingParamsSchema, request.params, "params");
    const approved = await store.pairing.approve(code, now());
    if (!approved) throw new RequestError(`pairing code ${code} is unknown or expired`, 404);
    request.log.info({ channel: approved.channel, senderId: approved.senderId }, "pairing approved through the API");
    return { approved };
  });
}
