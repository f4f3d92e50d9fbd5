/**
 * The OpenAI-compatible endpoint with the `openai` SDK as its client, against a real gateway and
 * worker in this process (the memory bus; and once over Redis, gateway and worker each with their
 * own connection), the model being the fake OpenAI server: what the agent's model receives shows
 * which history each session has.
 */
import { randomUUID } from "node:crypto";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { Redis } from "ioredis";
import OpenAI, { type APIError, AuthenticationError, BadRequestError, InternalServerError, NotFoundError } from "openai";
import pino from "pino";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { type Worker, createWorker } from "../../../src/app/worker.js";
import { type Gateway, createGateway } from "../../../src/app/gateway.js";
import { type Infrastructure, createInfrastructure } from "../../../src/app/infrastructure.js";
import { loadConfig } from "../../../src/config/load.js";
import { type FakeOpenAIServer, type FakeOpenAIStep, startFakeOpenAI } from "../../support/fake-openai-server.js";
import { deleteKeys, redisUrl } from "../../support/redis.js";

const TOKEN = "openai-endpoint-api-token";
const CLIENT_KEY = "client-key-0123456789abcdef";
const AGENT_USAGE = { promptTokens: 11, completionTokens: 7 };
const TEAM_USAGE = { promptTokens: 5, completionTokens: 3 };

/** A promise the test lets go; every one is let go at the end so no held response outlives the file. */
function gate(): { promise: Promise<void>; open: () => void } {
  let open!: () => void;
  const promise = new Promise<void>((resolve) => (open = resolve));
  held.push(open);
  return { promise, open };
}
const held: Array<() => void> = [];
let holdOne = gate();
let afterLook = gate();
const never = gate();

interface Message {
  role: string;
  content: unknown;
}
const textOf = (message: Message | undefined) => (typeof message?.content === "string" ? message.content : "");

/** The agent echoes the user; team agents report; two prompts take a tool call first. */
function script(body: Record<string, unknown>): FakeOpenAIStep {
  const messages = body.messages as Message[];
  const role = /^You are (.+?), one agent/m.exec(textOf(messages[0]))?.[1];
  if (role === "Sleeper") return { text: "woke up", until: never.promise };
  if (role === "Broken") return { error: { status: 400, message: "the broken agent's model refused" } };
  if (role) return { text: `${role} says: ${/^Goal: (.*)$/m.exec(textOf(messages[1]))?.[1] ?? "?"} looks fine`, usage: TEAM_USAGE };
  const userText = textOf([...messages].reverse().find((message) => message.role === "user"));
  const afterTool = messages.at(-1)?.role === "tool";
  if (userText.endsWith("look around")) {
    return afterTool ? { text: "Done looking.", until: afterLook.promise, usage: AGENT_USAGE } : { text: ["Let me ", "look."], toolCalls: [{ name: "list_dir", arguments: "{}" }], usage: AGENT_USAGE };
  }
  if (userText.endsWith("slow job")) return afterTool ? { text: "never said", until: never.promise } : { text: "Working on it.", toolCalls: [{ name: "list_dir", arguments: "{}" }] };
  if (userText.endsWith("one")) return { text: "echo: one", until: holdOne.promise, usage: AGENT_USAGE };
  return { text: ["echo: ", userText.split("\n").at(-1)!], usage: AGENT_USAGE };
}

interface Deployment {
  url: string;
  gateway: Gateway;
  worker: Worker;
  infrastructure: Infrastructure;
  client(key?: string): OpenAI;
  /** With `gateways: 2`: a client of the second gateway. */
  secondClient?: () => OpenAI;
  close(): Promise<void>;
}

async function startDeployment(llm: FakeOpenAIServer, options: { prefix?: string; gateways?: 2 } = {}): Promise<Deployment> {
  const root = await mkdtemp(path.join(tmpdir(), "countbot-openai-endpoint-"));
  const file = path.join(root, "countbot.json");
  await writeFile(
    file,
    JSON.stringify({
      agent: { model: "openai/gpt-test", providerRetries: 0 },
      providers: { openai: { apiKey: "sk-fake-0123456789", baseURL: llm.url } },
      api: { port: 0, token: TOKEN, openai: { apiKeys: [CLIENT_KEY] } },
      tools: { exec: { enabled: false } },
      ...(options.prefix ? { redis: { url: redisUrl, prefix: options.prefix } } : {}),
      teams: {
        Reviewers: {
          mode: "graph",
          agents: [
            { id: "drafter", role: "Drafter", task: "draft an answer" },
            { id: "critic", role: "Critic", task: "check the draft", dependsOn: ["drafter"] },
          ],
        },
        Retired: { mode: "graph", enabled: false, agents: [{ id: "old", role: "Old", task: "nothing" }] },
        Sleepers: { mode: "graph", agents: [{ id: "sleeper", role: "Sleeper", task: "take forever" }] },
        Fragile: { mode: "graph", agents: [{ id: "broken", role: "Broken", task: "fail" }] },
      },
    }),
  );
  const config = loadConfig({ env: { COUNTBOT_DATA_DIR: path.join(root, "data") }, cwd: root, file, channels: [] });
  const logger = pino({ level: process.env.TEST_LOG_LEVEL ?? "silent" });
  // Over Redis the gateway and the worker each have their own connections, as two processes would.
  const infrastructure = await createInfrastructure(config, logger);
  const workerInfrastructure = options.prefix ? await createInfrastructure(config, logger) : infrastructure;
  const worker: Worker = await createWorker(config, logger, workerInfrastructure);
  const gateway = await createGateway({ config, logger, infrastructure, subagents: worker.jobs.subagents, workflows: worker.jobs.workflows, teams: worker.jobs.teams, plugins: [] });
  const { url } = await gateway.start();
  // A second gateway on its own connections: the replies on the bus are shared between the two.
  const secondInfrastructure = options.gateways === 2 ? await createInfrastructure(config, logger) : undefined;
  const second = secondInfrastructure && (await createGateway({ config, logger, infrastructure: secondInfrastructure, subagents: worker.jobs.subagents, workflows: worker.jobs.workflows, teams: worker.jobs.teams, plugins: [] }));
  const secondUrl = second && (await second.start()).url;
  void worker.run();
  return {
    url,
    gateway,
    worker,
    infrastructure,
    client: (key = CLIENT_KEY) => new OpenAI({ baseURL: `${url}/v1`, apiKey: key, maxRetries: 0 }),
    ...(secondUrl ? { secondClient: () => new OpenAI({ baseURL: `${secondUrl}/v1`, apiKey: CLIENT_KEY, maxRetries: 0 }) } : {}),
    async close() {
      await second?.close();
      await secondInfrastructure?.close();
      await gateway.close();
      await worker.close();
      if (workerInfrastructure !== infrastructure) await workerInfrastructure.close();
      await infrastructure.close();
      await rm(root, { recursive: true, force: true });
    },
  };
}

/** The user texts of every model request of the main agent that mentions `marker`. */
function agentRequestsWith(llm: FakeOpenAIServer, marker: string): string[][] {
  return llm.requests
    .map((request) => request.body.messages as Message[])
    .filter((messages) => !/^You are .+?, one agent/m.test(textOf(messages[0])))
    .filter((messages) => messages.some((message) => textOf(message).includes(marker)))
    .map((messages) => messages.filter((message) => message.role === "user" || message.role === "assistant").map(textOf));
}

async function until<T>(probe: () => Promise<T | undefined> | T | undefined, what: string, limitMs = 10_000): Promise<T> {
  const deadline = Date.now() + limitMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined && value !== false) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

let llm: FakeOpenAIServer;
beforeAll(async () => {
  llm = await startFakeOpenAI({ script });
});
afterAll(async () => {
  for (const open of held) open();
  await llm?.close();
});

describe("the OpenAI-compatible endpoint on one process", () => {
  let deployment: Deployment;
  beforeAll(async () => {
    deployment = await startDeployment(llm);
  }, 30_000);
  afterAll(async () => {
    await deployment?.close();
  });
  afterEach(() => {
    holdOne = gate();
    afterLook = gate();
  });

  it("answers a chat completion with the agent's reply and the turn's token counts", async () => {
    const completion = await deployment.client().chat.completions.create({ model: "countbot", messages: [{ role: "user", content: "hello there" }], user: "usage-check" });
    expect(completion.object).toBe("chat.completion");
    expect(completion.model).toBe("countbot");
    expect(completion.choices).toHaveLength(1);
    expect(completion.choices[0]!.message).toMatchObject({ role: "assistant", content: "echo: hello there" });
    expect(completion.choices[0]!.finish_reason).toBe("stop");
    expect(completion.usage).toMatchObject({ prompt_tokens: 11, completion_tokens: 7, total_tokens: 18 });
  });

  it("streams the reply as chat.completion.chunk events while the turn runs, then the usage and [DONE]", { timeout: 8000 }, async () => {
    const stream = await deployment.client().chat.completions.create({
      model: "countbot",
      messages: [{ role: "user", content: "please look around" }],
      user: "streamer",
      stream: true,
      stream_options: { include_usage: true },
    });
    const chunks: OpenAI.Chat.Completions.ChatCompletionChunk[] = [];
    let content = "";
    for await (const chunk of stream) {
      chunks.push(chunk);
      content += chunk.choices[0]?.delta.content ?? "";
      // The model's second call waits for this: the text before the tool call came as it was written.
      if (content.includes("Let me look.")) afterLook.open();
    }
    expect(content).toBe("Let me look.\n\nDone looking.");
    expect(chunks.every((chunk) => chunk.object === "chat.completion.chunk" && chunk.id === chunks[0]!.id)).toBe(true);
    expect(chunks[0]!.choices[0]!.delta.role).toBe("assistant");
    const finish = chunks.findIndex((chunk) => chunk.choices[0]?.finish_reason === "stop");
    expect(finish).toBe(chunks.length - 2);
    // Two model calls of one turn, counted together.
    expect(chunks.at(-1)).toMatchObject({ choices: [], usage: { prompt_tokens: 22, completion_tokens: 14, total_tokens: 36 } });
  });

  it("keeps sessions apart: by `user`, by X-Session-Id, and by key", async () => {
    const client = deployment.client();
    await client.chat.completions.create({ model: "countbot", messages: [{ role: "user", content: "alice-secret is my password" }], user: "alice" });
    await client.chat.completions.create({ model: "countbot", messages: [{ role: "user", content: "bob asks what the password is" }] }, { headers: { "X-Session-Id": "bob" } });
    await client.chat.completions.create({ model: "countbot", messages: [{ role: "user", content: "alice asks again" }], user: "alice" });
    // Bob's session never saw Alice's message; Alice's second turn had her first one.
    expect(agentRequestsWith(llm, "bob asks")).toHaveLength(1);
    expect(agentRequestsWith(llm, "bob asks").flat().join("\n")).not.toContain("alice-secret");
    const alice = agentRequestsWith(llm, "alice asks again");
    expect(alice).toHaveLength(1);
    expect(alice[0]!.join("\n")).toContain("alice-secret is my password");
    expect(alice[0]!.join("\n")).toContain("echo: alice-secret is my password");

    // No session id: one session per key, and the API token is another key than the client's.
    await client.chat.completions.create({ model: "countbot", messages: [{ role: "user", content: "keyed-note first" }] });
    await deployment.client(TOKEN).chat.completions.create({ model: "countbot", messages: [{ role: "user", content: "token asks keyed-note" }] });
    await client.chat.completions.create({ model: "countbot", messages: [{ role: "user", content: "client asks keyed-note" }] });
    expect(agentRequestsWith(llm, "token asks keyed-note").flat().join("\n")).not.toContain("keyed-note first");
    expect(agentRequestsWith(llm, "client asks keyed-note").flat().join("\n")).toContain("keyed-note first");
  });

  it("gives each of several requests of one session its own answer, one turn after the other", async () => {
    const client = deployment.client();
    const ask = (content: string) => client.chat.completions.create({ model: "countbot", messages: [{ role: "user", content }], user: "carol" });
    const first = ask("carol says one");
    await until(() => agentRequestsWith(llm, "carol says one").length === 1, "the first turn's model call");
    // Both queued behind the first turn: a chat platform's burst would become one turn, these do not.
    const second = ask("carol says two");
    const third = ask("carol says three");
    await until(() => deployment.gateway.openai!.waiting === 3, "all three requests waiting");
    holdOne.open();
    const answers = await Promise.all([first, second, third]);
    expect(answers.map((answer) => answer.choices[0]!.message.content)).toEqual(["echo: one", "echo: carol says two", "echo: carol says three"]);
    const thirdCall = agentRequestsWith(llm, "carol says three");
    expect(thirdCall).toHaveLength(1);
    expect(thirdCall[0]!.slice(-3)).toEqual([expect.stringContaining("carol says two"), "echo: carol says two", expect.stringContaining("carol says three")]);
  });

  it("cancels the turn of a client that went away mid-stream", async () => {
    const bus = deployment.infrastructure.bus;
    const stream = await deployment.client().chat.completions.create({ model: "countbot", messages: [{ role: "user", content: "a slow job" }], user: "leaver", stream: true });
    for await (const chunk of stream) {
      if (chunk.choices[0]?.delta.content?.includes("Working")) break; // leaving the loop aborts the request
    }
    // The second model call would wait forever: only the cancel ends the turn and frees the session.
    await until(async () => deployment.gateway.openai!.waiting === 0 && (await bus.stats()).leased === 0, "the abandoned turn to end");
  });

  it("runs a team for the model team:<name> and answers with its result and its agents' tokens", async () => {
    const client = deployment.client();
    const completion = await client.chat.completions.create({ model: "team:Reviewers", messages: [{ role: "user", content: "check the plan" }] });
    expect(completion.model).toBe("team:Reviewers");
    expect(completion.choices[0]!.message.content).toBe("Critic says: check the plan looks fine");
    expect(completion.usage).toMatchObject({ prompt_tokens: 10, completion_tokens: 6, total_tokens: 16 });
    const runs = await deployment.worker.jobs.workflows.list();
    expect(runs.find((run) => run.goal === "check the plan")).toMatchObject({ teamName: "Reviewers", origin: "openai" });

    const stream = await client.chat.completions.create({ model: "team:reviewers", messages: [{ role: "user", content: "check the streamed plan" }], stream: true });
    let content = "";
    for await (const chunk of stream) content += chunk.choices[0]?.delta.content ?? "";
    expect(content).toBe("Critic says: check the streamed plan looks fine");

    const failed = await client.chat.completions.create({ model: "team:Fragile", messages: [{ role: "user", content: "try it" }] }).catch((error: unknown) => error);
    expect(failed).toBeInstanceOf(InternalServerError);
    expect(failed).toMatchObject({ status: 502, code: "team_run_failed", type: "server_error" });
    expect((failed as APIError).message).toContain("the broken agent's model refused");

    const missing = await client.chat.completions.create({ model: "team:Retired", messages: [{ role: "user", content: "x" }] }).catch((error: unknown) => error);
    expect(missing).toBeInstanceOf(NotFoundError);
    expect(missing).toMatchObject({ status: 404, code: "model_not_found", param: "model" });
  });

  it("cancels the team run of a client that went away", async () => {
    const leaving = new AbortController();
    const request = deployment.client().chat.completions.create({ model: "team:Sleepers", messages: [{ role: "user", content: "sleep on it" }] }, { signal: leaving.signal });
    request.catch(() => undefined);
    const run = await until(async () => (await deployment.worker.jobs.workflows.list()).find((candidate) => candidate.teamName === "Sleepers" && candidate.nodes[0]!.status === "running"), "the run's agent to start");
    leaving.abort();
    await until(async () => (await deployment.worker.jobs.workflows.get(run.id))?.status === "cancelled", "the run to be cancelled");
    expect(run.goal).toBe("sleep on it");
    expect(run.sessionKey).toBe("");
  });

  it("starts the session over on /new", async () => {
    const client = deployment.client();
    await client.chat.completions.create({ model: "countbot", messages: [{ role: "user", content: "remember the-old-topic" }], user: "renewer" });
    const reset = await client.chat.completions.create({ model: "countbot", messages: [{ role: "user", content: "/new" }], user: "renewer" });
    expect(reset.choices[0]!.message.content).toBe("Started a new conversation.");
    await client.chat.completions.create({ model: "countbot", messages: [{ role: "user", content: "renewer starts afresh" }], user: "renewer" });
    expect(agentRequestsWith(llm, "renewer starts afresh").flat().join("\n")).not.toContain("the-old-topic");
  });

  it("lists the agent and the enabled teams as models", async () => {
    const client = deployment.client();
    const ids: string[] = [];
    for await (const model of client.models.list()) ids.push(model.id);
    expect(ids).toEqual(["countbot", "team:Fragile", "team:Reviewers", "team:Sleepers"]);
    expect(await client.models.retrieve("team:Reviewers")).toMatchObject({ id: "team:Reviewers", object: "model", owned_by: "countbot" });
    await expect(client.models.retrieve("team:Retired")).rejects.toBeInstanceOf(NotFoundError);
  });

  it("refuses a wrong or missing key with 401 in OpenAI's error shape", async () => {
    const refused = await deployment.client("sk-not-a-key-of-this-bot").chat.completions.create({ model: "countbot", messages: [{ role: "user", content: "hi" }] }).catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(AuthenticationError);
    expect(refused).toMatchObject({ status: 401, code: "invalid_api_key", type: "invalid_request_error" });
    const bare = await fetch(`${deployment.url}/v1/models`);
    expect(bare.status).toBe(401);
    expect(await bare.json()).toEqual({ error: { message: expect.stringContaining("API key"), type: "invalid_request_error", param: null, code: "invalid_api_key" } });
    // The client keys open /v1/ only, not the rest of the API.
    expect((await fetch(`${deployment.url}/api/agent-teams`, { headers: { authorization: `Bearer ${CLIENT_KEY}` } })).status).toBe(401);
  });

  it("refuses a bad body with 400 naming the field", async () => {
    const client = deployment.client();
    const cases: Array<[body: Record<string, unknown>, param: string]> = [
      [{ messages: [{ role: "user", content: "hi" }] }, "model"],
      [{ model: "countbot", messages: [{ role: "user", content: 42 }] }, "messages[0].content"],
      [{ model: "countbot", messages: [{ role: "robot", content: "hi" }] }, "messages[0].role"],
      [{ model: "countbot", messages: [{ role: "user", content: "hi" }, { role: "assistant", content: "hello" }] }, "messages[1].role"],
      [{ model: "countbot", messages: [{ role: "user", content: [{ type: "image_url", image_url: { url: "data:," } }] }] }, "messages[0].content[0].type"],
      [{ model: "countbot", messages: [{ role: "user", content: "hi" }], n: 2 }, "n"],
      [{ model: "countbot", messages: [{ role: "user", content: "hi" }], tools: [{ type: "function", function: { name: "f" } }] }, "tools"],
      [{ model: "countbot", messages: [{ role: "user", content: "hi" }], user: "no spaces allowed" }, "user"],
    ];
    for (const [body, param] of cases) {
      const error = await client.chat.completions.create(body as never).catch((caught: unknown) => caught);
      expect(error, param).toBeInstanceOf(BadRequestError);
      expect((error as APIError).param, JSON.stringify(body)).toBe(param);
      expect((error as APIError).message).toContain(`${param}:`);
    }
  });

  it("refuses a cross-origin browser POST and a body that is not JSON, in OpenAI's shape", async () => {
    const headers = { authorization: `Bearer ${CLIENT_KEY}`, "content-type": "application/json" };
    const body = JSON.stringify({ model: "countbot", messages: [{ role: "user", content: "from a web page" }] });
    const crossSite = await fetch(`${deployment.url}/v1/chat/completions`, { method: "POST", headers: { ...headers, origin: "https://evil.example" }, body });
    expect(crossSite.status).toBe(403);
    expect(await crossSite.json()).toMatchObject({ error: { type: "invalid_request_error", code: "origin_not_allowed", param: null } });
    const plain = await fetch(`${deployment.url}/v1/chat/completions`, { method: "POST", headers: { ...headers, "content-type": "text/plain" }, body });
    expect(plain.status).toBe(415);
    expect(await plain.json()).toMatchObject({ error: { code: "unsupported_media_type" } });
    const unknown = await fetch(`${deployment.url}/v1/embeddings`, { method: "POST", headers, body: "{}" });
    expect(unknown.status).toBe(404);
    expect(await unknown.json()).toMatchObject({ error: { code: "not_found" } });
    expect(agentRequestsWith(llm, "from a web page")).toEqual([]);
  });
});

describe("the OpenAI-compatible endpoint over Redis", () => {
  const prefix = `countbot-openai-${randomUUID()}`;
  let deployment: Deployment;
  let redis: Redis;
  beforeAll(async () => {
    redis = new Redis(redisUrl);
    deployment = await startDeployment(llm, { prefix, gateways: 2 });
  }, 30_000);
  afterAll(async () => {
    await deployment?.close();
    await deleteKeys(redis, prefix);
    await redis?.quit();
  });

  it("answers through the Redis bus, streamed and not, from a worker with its own connection", async () => {
    const client = deployment.client();
    const completion = await client.chat.completions.create({ model: "countbot", messages: [{ role: "user", content: "redis hello" }], user: "over-redis" });
    expect(completion.choices[0]!.message.content).toBe("echo: redis hello");
    expect(completion.usage?.total_tokens).toBe(18);
    const stream = await client.chat.completions.create({ model: "countbot", messages: [{ role: "user", content: "redis again" }], user: "over-redis", stream: true });
    let content = "";
    for await (const chunk of stream) content += chunk.choices[0]?.delta.content ?? "";
    expect(content).toBe("echo: redis again");
    expect(agentRequestsWith(llm, "redis again")[0]!.join("\n")).toContain("echo: redis hello");
  });

  it("answers each request at the gateway that holds it, whichever gateway took the reply off the bus", async () => {
    // The two gateways' consumers take turns at the channel's replies, so some of each gateway's
    // replies reach the other first and are handed over.
    const clients = [deployment.client(), deployment.secondClient!()];
    for (let round = 0; round < 6; round++) {
      const client = clients[round % 2]!;
      const content = `round ${round} at gateway ${round % 2}`;
      if (round % 4 < 2) {
        const completion = await client.chat.completions.create({ model: "countbot", messages: [{ role: "user", content }], user: "two-gateways" });
        expect(completion.choices[0]!.message.content).toBe(`echo: ${content}`);
      } else {
        const stream = await client.chat.completions.create({ model: "countbot", messages: [{ role: "user", content }], user: "two-gateways", stream: true });
        let text = "";
        for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? "";
        expect(text).toBe(`echo: ${content}`);
      }
    }
  });
});
