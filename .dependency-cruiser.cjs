/**
 * The layering, enforced in `npm test` (dependency-cruiser): a module imports only from layers
 * below its own, never sideways into a sibling layer, never back up. Top to bottom:
 *
 *   cli → app → api | channels → gateway | jobs → agent → budget | memory | prompt → tools → providers | store → bus → base
 *
 * `budget`, `memory` and `prompt` are what the agent and a gateway both know, kept out of agent/ so
 * a gateway need not load the agent to use them: the budget policy, periods, replies and usage
 * report (the API's and the CLI's usage views); the long-term memory stores (the composition root
 * builds them, the API reads and writes them); the system prompt's sections and the speaker labels
 * (the workflow engine and the team trigger use them, and a gateway loads both to start, list and
 * cancel team runs).
 * `base` is what every layer may use: src/config, src/redis, src/bounded.ts, src/errors.ts, src/logger.ts, src/metrics.ts,
 * src/sleep.ts, src/tracing.ts. A platform folder under channels/ imports no other platform's (only channels/index.ts
 * lists them), and from the core only the channel kit (src/gateway/kit/index.ts), the message model
 * and the errors; a platform's SDK is imported only from its own folder.
 * tests/unit/layering.test.ts proves a wrong import is caught, by each rule.
 */
const layers = [
  ["cli", "^src/cli/"],
  ["app", "^src/app/"],
  ["api", "^src/api/"],
  ["channels", "^channels/"],
  ["gateway", "^src/gateway/"],
  ["jobs", "^src/jobs/"],
  ["agent", "^src/agent/"],
  ["budget", "^src/budget/"],
  ["memory", "^src/memory/"],
  ["prompt", "^src/prompt/"],
  ["tools", "^src/tools/"],
  ["providers", "^src/providers/"],
  ["store", "^src/store/"],
  ["bus", "^src/bus/"],
  ["base", "^src/(config/|redis/|bounded\\.ts$|errors\\.ts$|logger\\.ts$|sleep\\.ts$|metrics\\.ts$|tracing\\.ts$)"],
];
// Layers that share a rank are siblings: neither may import the other.
const rank = { cli: 7, app: 6, api: 5, channels: 5, gateway: 4, jobs: 4, agent: 3, budget: 2.5, memory: 2.5, prompt: 2.5, tools: 2, providers: 1, store: 1, bus: 0, base: -1 };

const upward = layers
  .map(([name, path]) => [name, path, layers.filter(([other]) => other !== name && rank[other] >= rank[name]).map(([, otherPath]) => otherPath)])
  .filter(([, , above]) => above.length > 0)
  .map(([name, path, above]) => ({
    name: `layer-${name}`,
    comment: `${name} imports only from layers below it`,
    severity: "error",
    from: { path },
    to: { path: above },
  }));

/**
 * Where a gateway process starts: `countbot gateway`'s command and the gateway it builds. (The CLI's
 * main module is loaded by every command and names each one's module for its types, so it is no
 * entry here; tests/e2e/channel-sdks.test.ts checks what a running gateway really loads.)
 */
const gatewayEntries = "^src/(cli/gateway-command|app/gateway)\\.ts$";

/** Each platform's SDK packages: only `channels/<platform>/` may import them. */
const platformSdks = {
  telegram: ["telegraf"],
  discord: ["discord\\.js", "@discordjs/[^/]+"],
  feishu: ["@larksuiteoapi/node-sdk"],
  dingtalk: ["dingtalk-stream"],
  qq: ["qq-official-bot", "qq-guild-bot"],
  slack: ["@slack/[^/]+"],
  wecom: ["@wecom/[^/]+"],
};

const sdkRules = Object.entries(platformSdks).map(([platform, packages]) => ({
  name: `sdk-${platform}`,
  comment: `only channels/${platform}/ imports ${platform}'s SDK`,
  severity: "error",
  from: { pathNot: `^channels/${platform}/` },
  // Resolved into node_modules, or (when it is not installed) the bare module name.
  to: { path: `(^|node_modules/)(${packages.join("|")})(/|$)` },
}));

module.exports = {
  forbidden: [
    ...upward,
    ...sdkRules,
    {
      name: "channel-kit-only",
      comment: "a platform folder takes from the core only the channel kit, the message model and the errors",
      severity: "error",
      from: { path: "^channels/" },
      to: { path: "^src/", pathNot: "^src/(gateway/kit/index\\.ts|bus/message\\.ts|errors\\.ts)$" },
    },
    {
      name: "gateway-no-agent",
      comment:
        "a gateway process loads no agent code: its command, and the gateway it builds, reach nothing under src/agent/ (types included), so what both need lives in budget/, memory/, prompt/ and the bus",
      severity: "error",
      from: { path: gatewayEntries },
      to: { path: "^src/agent/", reachable: true },
    },
    {
      name: "no-circular",
      comment: "import circles hide which part depends on which",
      severity: "error",
      from: {},
      to: { circular: true },
    },
    {
      name: "platform-apart",
      comment: "a platform folder does not import another platform's code",
      severity: "error",
      from: { path: "^channels/([^/]+)/" },
      to: { path: "^channels/", pathNot: "^channels/$1/" },
    },
    {
      name: "everything-in-a-layer",
      comment: "every module under src/ belongs to a layer",
      severity: "error",
      from: { path: "^src/", pathNot: layers.map(([, path]) => path) },
      to: {},
    },
  ],
  options: {
    doNotFollow: { path: "node_modules" },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: "tsconfig.json" },
    // node_modules is not followed, but stays in the graph: the SDK rules look at imports into it.
  },
};
