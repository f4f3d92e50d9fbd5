/**
 * The benchmarks' fake OpenAI server in a process of its own (started by ./fake-llm.ts), so its
 * CPU is measured apart and it does not share an event loop with the load generator. It answers
 * every call "ok, noted." after the delay it was last told, keeps connections alive and has a long
 * listen backlog (a burst of 2,000 connections at once is accepted, not reset).
 *
 * Talks to its parent over the IPC channel: `{ id, type: "delay", ms }`, `{ id, type: "calls" }`
 * (start times of the calls since the last reset, ms since the epoch, and connections accepted),
 * `{ id, type: "reset" }`, `{ id, type: "close" }`; each is answered `{ id, ... }`.
 */
import { startFakeOpenAI } from "../tests/support/fake-openai-server.js";

let delayMs = 0;
let starts: number[] = [];
const llm = await startFakeOpenAI({
  script: () => {
    starts.push(performance.timeOrigin + performance.now());
    // The server keeps every request body; a 100,000-call benchmark must not.
    llm.requests.length = 0;
    return { text: "ok, noted.", delayMs };
  },
});

type Request = { id: number; type: "delay"; ms: number } | { id: number; type: "calls" | "reset" | "close" };

process.on("message", (raw) => {
  const request = raw as Request;
  const answer = (body: Record<string, unknown> = {}) => process.send!({ id: request.id, ...body });
  switch (request.type) {
    case "delay":
      delayMs = request.ms;
      return answer();
    case "calls":
      return answer({ starts, connections: llm.connections() });
    case "reset":
      starts = [];
      return answer();
    case "close":
      void llm.close().finally(() => {
        answer();
        process.exit(0);
      });
  }
});
process.on("disconnect", () => process.exit(0));
process.send!({ id: 0, url: llm.url });
