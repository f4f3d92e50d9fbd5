/**
 * The benchmarks' fake OpenAI server in a process of its own (started by ./fake-llm.ts), so its
 * CPU is measured apart and it does not share an event loop with the load generator. It answers
 * every call "ok, noted." after the delay it was last told, keeps connections alive and has a long
 * listen backlog (a burst of 2,000 connections at once is accepted, not reset).
 *
 * Talks to its parent over the IPC channel (./ipc-child.ts): `delay` (ms), `calls` (start times of
 * the calls since the last reset, ms since the epoch, and connections accepted), `reset`, `close`.
 */
import { startFakeOpenAI } from "../tests/support/fake-openai-server.js";
import { serveIpc } from "./ipc-child.js";

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

serveIpc(
  { url: llm.url },
  async (request) => {
    if (request.type === "delay") delayMs = Number(request.ms);
    else if (request.type === "calls") return { starts, connections: llm.connections() };
    else if (request.type === "reset") starts = [];
  },
  () => llm.close(),
);
