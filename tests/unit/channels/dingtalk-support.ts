/** Shared set-up of the DingTalk channel tests: the fake platform, an adapter on it, a sink that records. */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pino from "pino";
import { expect } from "vitest";
import { type DingTalkAdapterOptions, createDingTalkAdapter } from "../../../channels/dingtalk/dingtalk-adapter.js";
import type { AdmissionOutcome, PlatformEvent } from "../../../src/gateway/channel.js";
import { type FakeDingTalkOptions, type FakeDingTalkServer, type FakeUser, startFakeDingTalk } from "../../support/fake-dingtalk-server.js";

export const APP_KEY = "dingappkeyfake0001";
export const APP_SECRET = "dingtalk-app-secret-do-not-leak";

export const alice: FakeUser = { staffId: "alice01", dingtalkId: "$:LWCP_v1:$alice0000000001", nick: "Alice" };
export const bob: FakeUser = { staffId: "bob02", dingtalkId: "$:LWCP_v1:$bob00000000002", nick: "Bob" };
/** Someone outside the app's organization: no staffId. */
export const guest: FakeUser = { dingtalkId: "$:LWCP_v1:$guest000000003", nick: "Guest" };

export type Cleanup = () => Promise<void>;

export async function startDingTalk(cleanups: Cleanup[], options: Partial<FakeDingTalkOptions> = {}): Promise<FakeDingTalkServer> {
  const dingtalk = await startFakeDingTalk({ appKey: APP_KEY, appSecret: APP_SECRET, ...options });
  cleanups.push(() => dingtalk.close());
  return dingtalk;
}

export async function dingtalkAdapter(cleanups: Cleanup[], dingtalk: FakeDingTalkServer, overrides: Partial<DingTalkAdapterOptions> = {}) {
  const downloadDir = await mkdtemp(join(tmpdir(), "countbot-dingtalk-"));
  const logLines: string[] = [];
  const logger = pino({ level: "trace" }, { write: (line: string) => void logLines.push(line) });
  const adapter = createDingTalkAdapter({
    appKey: APP_KEY,
    appSecret: APP_SECRET,
    robotCode: APP_KEY,
    apiRoot: dingtalk.origin,
    mode: "stream",
    aiCard: { enabled: true, templateId: "tpl.schema", contentKey: "msgContent", settleMs: 60_000 },
    maxImageBytes: 1_000_000,
    maxFileBytes: 1_000_000,
    downloadDir,
    logger,
    ...overrides,
  });
  const events: PlatformEvent[] = [];
  let outcome: AdmissionOutcome = "published";
  cleanups.push(async () => {
    await adapter.stop();
    await rm(downloadDir, { recursive: true, force: true });
    // Whatever happened in the test, no secret reached a log line.
    expect(logLines.join("\n")).not.toContain(APP_SECRET);
  });
  const sink = async (event: PlatformEvent) => {
    events.push(event);
    return outcome;
  };
  return { adapter, events, sink, logLines, downloadDir, answerWith: (next: AdmissionOutcome) => (outcome = next) };
}
