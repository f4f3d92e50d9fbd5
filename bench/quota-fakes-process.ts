/**
 * The quota bench's fake platforms (Telegram, Discord, Feishu, enforcing the published limits with
 * real 429 answers) in a process of their own, started by ./quotas.ts: a platform is not in the
 * gateway's process, and a fake sharing the gateways' event loop would stamp a call's arrival, and
 * answer it, as late as that loop lets it, which the governor must then count as a slow platform.
 *
 * Over the IPC channel (./ipc-child.ts): ready with the fakes' endpoints; `plan` (chats, grouped,
 * groups) makes the chats and answers the conversations; `watch` (finalsAt, length) looks every
 * 250 ms at what each platform shows and answers, once every final is shown once or after five
 * minutes, when each platform was done (the arrival of its last message call), the 429s each
 * sent, what is still wrong, and how far apart a busy Telegram group's calls arrived.
 */
import { type Conversation, PLATFORMS, type Platform, deliveryProblems, messageCallTimes, planConversations, rateLimitedAnswers, startLimitedFakes } from "../tests/support/quota-harness.js";
import { serveIpc } from "./ipc-child.js";

const fakes = await startLimitedFakes();
let conversations: Conversation[] = [];

async function watch(finalsAt: number, length: number): Promise<Record<string, unknown>> {
  const doneAt: Partial<Record<Platform, number>> = {};
  const deadline = finalsAt + 300_000;
  // Done: every chat shows its finals once; when is the arrival of the call that made it so. The
  // look, every 250 ms, only finds out, and takes time of the fakes' event loop (20 to 35 ms a
  // platform): only once as many calls came as there are finals.
  while (Object.keys(doneAt).length < PLATFORMS.length && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 250));
    for (const platform of PLATFORMS) {
      if (doneAt[platform] !== undefined) continue;
      const times = messageCallTimes(fakes, platform).filter((at) => at >= finalsAt);
      if (times.length >= conversations.length && deliveryProblems(fakes, conversations, length, [platform]).length === 0) doneAt[platform] = times.at(-1)!;
    }
  }
  if (process.env.BENCH_QUOTA_TRACE === "1") trace(finalsAt);
  return { doneAt, answered429: rateLimitedAnswers(fakes), problems: deliveryProblems(fakes, conversations, length), busyGroupGapMs: busyGroupGapMs(finalsAt) };
}

/**
 * `BENCH_QUOTA_TRACE=1`: per platform, how many calls arrived in each second after the finals were
 * published, and when the calls into the first busy group arrived (ms after the finals).
 */
function trace(finalsAt: number): void {
  const perSecond = (times: number[]) => {
    const counts = new Map<number, number>();
    for (const at of times) if (at >= finalsAt) counts.set(Math.floor((at - finalsAt) / 1000), (counts.get(Math.floor((at - finalsAt) / 1000)) ?? 0) + 1);
    return [...counts].sort((a, b) => a[0] - b[0]).map(([second, count]) => `${second}s:${count}`).join(" ");
  };
  const group = conversations.find((conversation) => conversation.group === 0);
  if (!group) return;
  const calls: Record<Platform, Array<{ at: number; chat: string }>> = {
    telegram: fakes.telegram.requests.filter((call) => call.method !== "sendChatAction" && call.method !== "getMe").map((call) => ({ at: call.at, chat: String(call.params.chat_id ?? "") })),
    discord: fakes.discord.requests.filter((call) => call.method !== "GET").map((call) => ({ at: call.at, chat: call.path.split("/")[2] ?? "" })),
    feishu: fakes.feishu.requests.filter((call) => call.method !== "GET" && !call.path.includes("auth")).map((call) => ({ at: call.at, chat: JSON.stringify(call).includes(group.chatIds.feishu) ? group.chatIds.feishu : "" })),
  };
  const routes = (names: string[]) => {
    const counts = new Map<string, number>();
    for (const name of names) counts.set(name, (counts.get(name) ?? 0) + 1);
    return [...counts].map(([name, count]) => `${name} ${count}`).join(", ");
  };
  console.log(`trace calls after the finals: telegram ${routes(fakes.telegram.requests.filter((call) => call.at >= finalsAt).map((call) => call.method))}; discord ${routes(fakes.discord.requests.filter((call) => call.at >= finalsAt).map((call) => call.route))}; feishu ${routes(fakes.feishu.requests.filter((call) => call.at >= finalsAt).map((call) => call.route))}`);
  const last = fakes.feishu.requests.filter((call) => call.route === "create" || call.route === "patch").slice(-8);
  console.log(`trace feishu: last calls ${last.map((call) => `${call.route} ${String(call.body.receive_id ?? call.path.split("/")[4] ?? "")} ${call.at - finalsAt}`).join(", ")}`);
  const feishuTimes = calls.feishu.map((call) => call.at - finalsAt).filter((at) => at >= -1_000).sort((a, b) => a - b);
  const feishuCalls = calls.feishu.filter((call) => call.at - finalsAt >= -1_000).sort((a, b) => a.at - b.at);
  const slow = feishuCalls.slice(50).map((call, index) => ({ index: index + 50, gap: call.at - feishuCalls[index]!.at, at: call.at - finalsAt })).sort((a, b) => b.gap - a.gap).slice(0, 8);
  console.log(`trace feishu: slowest chains (index gap at) ${slow.map((entry) => `${entry.index}:${entry.gap}@${entry.at}`).join(" ")}`);
  console.log(`trace feishu: every 50th call ${feishuTimes.filter((_, index) => index % 50 === 0 || index % 50 === 49).join(" ")}`);
  for (const platform of PLATFORMS) {
    console.log(`trace ${platform}: calls per second ${perSecond(calls[platform].map((call) => call.at))}`);
    console.log(`trace ${platform}: busy group ${group.chatIds[platform]} ${calls[platform].filter((call) => call.chat === group.chatIds[platform]).map((call) => call.at - finalsAt).join(" ")}`);
  }
}

/** The mean time between two calls that arrived for one Telegram group chat after the finals were published. */
function busyGroupGapMs(since: number): number {
  const byChat = new Map<string, number[]>();
  for (const call of fakes.telegram.requests) {
    const chatId = String(call.params.chat_id ?? "");
    if (call.at < since || !chatId.startsWith("-") || call.method === "sendChatAction") continue;
    byChat.set(chatId, [...(byChat.get(chatId) ?? []), call.at]);
  }
  const gaps = [...byChat.values()].flatMap((times) => times.slice(1).map((at, index) => at - times[index]!));
  return gaps.length === 0 ? Number.NaN : gaps.reduce((sum, gap) => sum + gap, 0) / gaps.length;
}

serveIpc(
  { endpoints: { telegram: { apiRoot: fakes.telegram.apiRoot }, discord: { apiRoot: fakes.discord.apiRoot }, feishu: { origin: fakes.feishu.origin } } },
  async (request) => {
    if (request.type === "plan") {
      conversations = planConversations(fakes, Number(request.chats), Number(request.grouped), Number(request.groups));
      return { conversations };
    }
    if (request.type === "watch") return watch(Number(request.finalsAt), Number(request.length));
    throw new Error(`unknown request ${request.type}`);
  },
  () => fakes.close(),
);
