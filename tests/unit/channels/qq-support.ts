/** Shared set-up of the QQ channel tests: the fake platform, an adapter on it, a sink that records. */
import pino from "pino";
import { type QQAdapterOptions, createQQAdapter } from "../../../channels/qq/qq-adapter.js";
import type { AdmissionOutcome, PlatformEvent } from "../../../src/gateway/kit/index.js";
import { type FakeQQOptions, type FakeQQServer, type FakeQQUser, startFakeQQ } from "../../support/fake-qq-server.js";

export const APP_ID = "102000042";
export const APP_SECRET = "qqUnitAppSecret0123456789abcdefX";
export const alice: FakeQQUser = { openid: "ALICEOPENID000000000000000000001", guildId: "10000000001", username: "Alice" };
export const bob: FakeQQUser = { openid: "BOBOPENID00000000000000000000002", guildId: "10000000002", username: "Bob" };

export type Cleanup = () => Promise<void>;

export async function startQQ(cleanups: Cleanup[], options: Partial<FakeQQOptions> = {}): Promise<FakeQQServer> {
  const qq = await startFakeQQ({ appId: APP_ID, appSecret: APP_SECRET, ...options });
  cleanups.push(() => qq.close());
  return qq;
}

export function qqAdapter(cleanups: Cleanup[], qq: FakeQQServer, overrides: Partial<QQAdapterOptions> = {}) {
  const logLines: string[] = [];
  const logger = pino({ level: "trace" }, { write: (line: string) => void logLines.push(line) });
  const adapter = createQQAdapter({
    appId: APP_ID,
    appSecret: APP_SECRET,
    apiRoot: qq.origin,
    tokenUrl: qq.tokenUrl,
    mode: "websocket",
    intents: ["groupAndC2C", "publicGuildMessages", "directMessage"],
    markdown: false,
    activeMessages: { groups: false, channels: true },
    logger,
    retryBaseMs: 20,
    ...overrides,
  });
  cleanups.push(() => adapter.stop());
  return { adapter, logLines };
}

export function recorder() {
  const events: PlatformEvent[] = [];
  return { events, sink: async (event: PlatformEvent): Promise<AdmissionOutcome> => (events.push(event), "published") };
}
