/** Shared set-up of the Feishu channel tests: the fake platform, an adapter on it, a sink that records. */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pino from "pino";
import { expect } from "vitest";
import { type FeishuAdapterOptions, createFeishuAdapter } from "../../../channels/feishu/feishu-adapter.js";
import type { AdmissionOutcome, PlatformEvent } from "../../../src/gateway/channel.js";
import { type FakeFeishuOptions, type FakeFeishuServer, startFakeFeishu } from "../../support/fake-feishu-server.js";

export const APP_ID = "cli_a1b2c3d4e5f60718";
export const APP_SECRET = "feishu-app-secret-do-not-leak";
export const ENCRYPT_KEY = "feishu-encrypt-key-do-not-leak";

export type Cleanup = () => Promise<void>;

export async function startFeishu(cleanups: Cleanup[], options: Partial<FakeFeishuOptions> = {}): Promise<FakeFeishuServer> {
  const feishu = await startFakeFeishu({ appId: APP_ID, appSecret: APP_SECRET, ...options });
  cleanups.push(() => feishu.close());
  return feishu;
}

export async function feishuAdapter(cleanups: Cleanup[], feishu: FakeFeishuServer, overrides: Partial<FeishuAdapterOptions> = {}) {
  const downloadDir = await mkdtemp(join(tmpdir(), "countbot-feishu-"));
  const logLines: string[] = [];
  const logger = pino({ level: "trace" }, { write: (line: string) => void logLines.push(line) });
  const adapter = createFeishuAdapter({
    appId: APP_ID,
    appSecret: APP_SECRET,
    domain: feishu.origin,
    mode: "longConnection",
    groupSessionScope: "chat",
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
    const logs = logLines.join("\n");
    expect(logs).not.toContain(APP_SECRET);
    expect(logs).not.toContain(ENCRYPT_KEY);
  });
  const sink = async (event: PlatformEvent) => {
    events.push(event);
    return outcome;
  };
  return { adapter, events, sink, logLines, downloadDir, answerWith: (next: AdmissionOutcome) => (outcome = next) };
}

/** The text of a card (JSON 2.0, one markdown element), a post or a text message the fake recorded. */
export function textOf(content: Record<string, unknown>): string {
  const card = content as { body?: { elements?: Array<{ content?: string }> } };
  if (card.body?.elements) return card.body.elements.map((element) => element.content ?? "").join("");
  const post = content as { zh_cn?: { content: Array<Array<{ text?: string }>> } };
  if (post.zh_cn) return post.zh_cn.content.flat().map((element) => element.text ?? "").join("");
  return String((content as { text?: unknown }).text ?? "");
}
