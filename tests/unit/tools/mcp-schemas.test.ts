/**
 * MCP tool schemas are untrusted input. A server declaring a catastrophic pattern (`^(a+)+$`, which
 * a backtracking RegExp takes hours over for 40 a's and a "!"), an exponential `anyOf` of
 * self-references or a quadratic `uniqueItems` cannot hold the event loop: patterns run on a
 * linear-time engine, every check runs in a worker with a deadline, and the loop keeps answering
 * HTTP requests meanwhile: the event loop's thread uses under 100 ms of CPU while the catastrophic
 * pattern is checked, and under a quarter of the 800 ms the costly checks run (the wall-clock worst
 * cases, which grow with the machine's load, are printed). Schemas too large, too deep
 * or with patterns the engine cannot take are refused at registration with the reason logged.
 */
import { createServer, request } from "node:http";
import type { AddressInfo } from "node:net";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { McpServers } from "../../../src/tools/mcp/mcp-servers.js";
import { JsonSchemaCompiler, MAX_SCHEMA_DEPTH } from "../../../src/tools/json-schema-parameters.js";
import { ToolRegistry } from "../../../src/tools/registry.js";
import { httpServer, recordingLogger, toolContext } from "../../support/mcp-fixtures.js";
import { startMcpHttpServer } from "../../support/mcp-http-server.js";

const EVIL = `${"a".repeat(40)}!`;
/** anyOf over three self-references: a check costs 3^depth of the arguments' nesting. */
const explosive = { type: "object", properties: { x: { $ref: "#/$defs/a" } }, $defs: { a: { type: "array", anyOf: [{ items: { $ref: "#/$defs/a" } }, { items: { $ref: "#/$defs/a" } }, { items: { $ref: "#/$defs/a" } }] } } };
function nested(depth: number): unknown {
  let value: unknown = 1;
  for (let level = 0; level < depth; level += 1) value = [value];
  return value;
}

let root: string;
const closers: Array<() => Promise<unknown>> = [];
beforeEach(async () => {
  root = await mkdtemp(path.join(tmpdir(), "countbot-mcp-schemas-"));
});
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close();
  await rm(root, { recursive: true, force: true });
});

/**
 * While `work` runs: the CPU time this thread (the event loop's) used, the longest round trip of
 * requests sent every 25 ms to a loopback HTTP server in this process, and a 10 ms timer's worst
 * lateness. The CPU time is the proof that the loop was not held: it does not grow with the
 * machine's load, while the two wall-clock figures do (they are printed, the worst case measured).
 */
async function responsivenessWhile<T>(work: () => Promise<T>): Promise<{ result: T; loopCpuMs: number; timerLateMs: number; worstMs: number; requests: number }> {
  const server = createServer((_request, response) => response.end("ok"));
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  closers.push(() => new Promise((resolve) => server.close(resolve)));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/health`;
  // node:http rather than fetch: the probe's own CPU stays small beside what is measured.
  const get = () => new Promise<void>((resolve, reject) => request(url, (response) => response.resume().on("end", resolve)).on("error", reject).end());
  await get();
  let running = true;
  const roundTrips: number[] = [];
  const probe = (async () => {
    while (running) {
      const started = performance.now();
      await get();
      roundTrips.push(performance.now() - started);
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
  })();
  let timerLateMs = 0;
  let expected = performance.now() + 10;
  const timer = setInterval(() => {
    const now = performance.now();
    timerLateMs = Math.max(timerLateMs, now - expected);
    expected = now + 10;
  }, 10);
  const cpuBefore = process.threadCpuUsage();
  const result = await work();
  const cpu = process.threadCpuUsage(cpuBefore);
  clearInterval(timer);
  running = false;
  await probe;
  return { result, loopCpuMs: (cpu.user + cpu.system) / 1000, timerLateMs, worstMs: Math.max(...roundTrips), requests: roundTrips.length };
}

describe("MCP tool schemas as untrusted input", () => {
  it("matches ^(a+)+$ against 40 a's and a '!' in linear time, and the event loop keeps answering", async () => {
    const compiler = new JsonSchemaCompiler();
    closers.push(() => compiler.close());
    const parameters = compiler.compile({ type: "object", properties: { name: { type: "string", pattern: "^(a+)+$" } }, patternProperties: { "^(x+x+)+y$": { type: "string" } } });
    // The worker is running before the measurement: what is measured is the check.
    expect(await parameters.checkArguments({ name: "a" })).toEqual({ ok: true, value: { name: "a" } });
    const { result, worstMs, timerLateMs, loopCpuMs } = await responsivenessWhile(async () => [
      await parameters.checkArguments({ name: EVIL }),
      await parameters.checkArguments({ [`${"x".repeat(40)}`]: 1 }),
      await parameters.checkArguments({ name: "a".repeat(100_000) }),
    ]);
    expect(result[0]).toEqual({ ok: false, issues: [{ path: ["name"], message: 'must match pattern "^(a+)+$"' }] });
    expect(result[1]).toEqual({ ok: true, value: { [`${"x".repeat(40)}`]: 1 } });
    expect(result[2]!.ok).toBe(true);
    console.info(`catastrophic pattern: event loop CPU ${loopCpuMs.toFixed(1)} ms; timer at most ${timerLateMs.toFixed(1)} ms late; worst HTTP round trip ${worstMs.toFixed(1)} ms`);
    expect(loopCpuMs).toBeLessThan(100);
  });

  it("gives up a check that would run for minutes (an exponential anyOf, a quadratic uniqueItems) at its deadline, answering HTTP meanwhile", async () => {
    const compiler = new JsonSchemaCompiler({ deadlineMs: 400 });
    closers.push(() => compiler.close());
    const parameters = compiler.compile(explosive);
    const unique = compiler.compile({ type: "object", properties: { list: { type: "array", uniqueItems: true } } });
    expect((await unique.checkArguments({ list: [1] })).ok).toBe(true);
    const list = Array.from({ length: 30_000 }, (_, index) => ({ index }));
    const { result, worstMs, timerLateMs, requests, loopCpuMs } = await responsivenessWhile(async () => [
      await parameters.checkArguments({ x: nested(20) }),
      await unique.checkArguments({ list }),
    ]);
    for (const outcome of result) {
      expect(outcome).toEqual({ ok: false, final: true, issues: [{ path: [], message: "took longer than 400 ms (the tool's schema is too costly for them); send smaller, flatter arguments" }] });
    }
    console.info(`costly schemas: event loop CPU ${loopCpuMs.toFixed(1)} ms in 800; timer at most ${timerLateMs.toFixed(1)} ms late; worst HTTP round trip ${worstMs.toFixed(1)} ms over ${requests}`);
    // The two checks ran 800 ms between them, in the worker: the loop answered HTTP all along, and
    // its CPU (the probe, cloning 30,000 items to the worker, replacing the worker it ended) stayed
    // under a quarter of that; a check on the loop would have used all 800 ms, in one piece.
    expect(requests).toBeGreaterThan(5);
    expect(loopCpuMs).toBeLessThan(200);
    // The next check gets a fresh worker and answers (this schema takes no finite nesting).
    const after = await parameters.checkArguments({ x: nested(3) });
    expect(after).toMatchObject({ ok: false, issues: expect.arrayContaining([{ path: ["x", 0, 0, 0], message: "must be array" }]) });
    expect(after).not.toHaveProperty("final");
  });

  it("refuses at registration a schema too large, too deep, or with a pattern the linear engine cannot take", () => {
    const compiler = new JsonSchemaCompiler();
    closers.push(() => compiler.close());
    const huge = { type: "object", properties: Object.fromEntries(Array.from({ length: 5_000 }, (_, index) => [`field_${index}`, { type: "string", description: "x".repeat(40) }])) };
    expect(() => compiler.compile(huge)).toThrow(/the input schema is \d+ bytes of JSON \(at most 262144\)/);
    let deep: Record<string, unknown> = { type: "string" };
    for (let level = 0; level < MAX_SCHEMA_DEPTH; level += 1) deep = { type: "object", properties: { inner: deep } };
    expect(() => compiler.compile(deep)).toThrow(`the input schema nests deeper than ${MAX_SCHEMA_DEPTH} levels`);
    expect(() => compiler.compile({ type: "object", properties: { password: { type: "string", pattern: "^(?=.*\\d).{8,}$" } } })).toThrow(/not one the linear-time engine takes \(no lookaround, no backreferences\)/);
    expect(() => compiler.compile({ type: "object", properties: { word: { type: "string", pattern: "(a)\\1" } } })).toThrow(/linear-time engine/);
    // ECMA escapes RE2 spells differently still work.
    const accented = compiler.compile({ type: "object", properties: { name: { type: "string", pattern: "^\\u00e9+$" } } });
    return expect(accented.checkArguments({ name: "éé" })).resolves.toEqual({ ok: true, value: { name: "éé" } });
  });

  it("through a real MCP server: the catastrophic pattern goes back to the model, the costly schema is cut off, the refused tools are logged and left out", async () => {
    const deep: Record<string, unknown> = { type: "object" };
    let cursor = deep;
    for (let level = 0; level < 40; level += 1) cursor = (cursor.properties = { inner: { type: "object" } }).inner as Record<string, unknown>;
    const server = await startMcpHttpServer({
      extraTools: [
        { name: "greet", description: "Catastrophic pattern.", inputSchema: { type: "object", properties: { name: { type: "string", pattern: "^(a+)+$" } }, required: ["name"] } },
        { name: "nest", description: "Exponential schema.", inputSchema: explosive },
        { name: "deep", description: "Too deep.", inputSchema: deep },
        { name: "lookahead", description: "Lookahead.", inputSchema: { type: "object", properties: { p: { type: "string", pattern: "^(?!admin).*$" } } } },
      ],
    });
    closers.push(() => server.close());
    const { logger, records } = recordingLogger();
    const mcp = new McpServers({ servers: { hostile: httpServer(server.url) }, allowedHosts: ["127.0.0.1"], workspace: root, logger, argumentCheckDeadlineMs: 400 });
    closers.push(() => mcp.close());
    const registry = new ToolRegistry();
    registry.addSource(mcp.toolSource("agent"));
    await registry.load();
    expect(registry.names()).toContain("mcp_hostile_greet");
    expect(registry.names()).not.toContain("mcp_hostile_deep");
    expect(registry.names()).not.toContain("mcp_hostile_lookahead");
    const refusals = records().filter((record) => record.tool === "deep" || record.tool === "lookahead");
    expect(refusals.map((record) => record.reason)).toEqual([expect.stringContaining("nests deeper than 32 levels"), expect.stringContaining("linear-time engine")]);

    let sequence = 0;
    const call = (name: string, args: unknown) => registry.execute({ id: `call-${++sequence}`, name, arguments: JSON.stringify(args) }, toolContext(root));
    expect((await call("mcp_hostile_greet", { name: 1 })).success).toBe(false);
    const { result, loopCpuMs, requests } = await responsivenessWhile(async () => [await call("mcp_hostile_greet", { name: EVIL }), await call("mcp_hostile_nest", { x: nested(20) })]);
    expect(result[0]!.content).toBe('Error: invalid arguments for mcp_hostile_greet: `name`: must match pattern "^(a+)+$". Next: Call mcp_hostile_greet again with the arguments fixed.');
    expect(result[1]!.content).toMatch(/^Error: invalid arguments for mcp_hostile_nest: arguments: took longer than 400 ms/);
    expect(requests).toBeGreaterThan(5);
    expect(loopCpuMs).toBeLessThan(200);
    expect(server.calls).toEqual([]);
    expect((await call("mcp_hostile_greet", { name: "aaaa" })).success).toBe(true);
  });
});
