/**
 * The WeCom driver of the adapter conformance suite: the intelligent robot (robot mode) through
 * WeCom's own SDK against the fake long connection. (The application mode cannot edit a message
 * it sent, which the suite's first case asks of every platform; its own tests cover it.)
 *
 * A robot can stream only in answer to a message: the rig's adapter, once started, has the owner
 * write in their chat first (a message the sink never sees), as a user does before a robot answers.
 */
import pino from "pino";
import { createWeComRobotAdapter } from "../../channels/wecom/robot-adapter.js";
import { createWeComScrubber } from "../../channels/wecom/wecom-errors.js";
import type { ChannelAdapter } from "../../src/gateway/kit/index.js";
import { startFakeAibot } from "../support/fake-wecom-aibot.js";
import type { AdapterDriver, AdapterRig, FailureKind } from "./adapter.suite.js";

const PRIME = "(the owner opens the chat)";

export const wecomRobot: AdapterDriver = {
  name: "WeCom",
  async rig(): Promise<AdapterRig> {
    const secret = "wecom-robot-conformance-secret";
    const fake = await startFakeAibot({ botId: "aibconformance01", secret, robotName: "CountBot" });
    const owner = "owner01";
    const stranger = "stranger02";
    const group = "wrgroupconformance";
    const inner = createWeComRobotAdapter({ botId: fake.botId, secret, wsUrl: fake.url, robotName: "CountBot", settleMs: 60_000, scrubber: createWeComScrubber([secret]), logger: pino({ level: "silent" }) });
    let primed = false;
    const adapter: ChannelAdapter = {
      name: inner.name,
      capabilities: inner.capabilities,
      render: (markdown) => inner.render!(markdown),
      measure: (markdown) => inner.measure!(markdown),
      async start(sink) {
        await inner.start(async (event) => (event.text === PRIME ? ((primed = true), "published") : sink(event)));
        primed = false;
        fake.say({ from: owner, text: PRIME });
        await fake.waitFor(() => primed, { what: "the owner's first message" });
      },
      stop: () => inner.stop(),
      send: (chatId, text, options) => inner.send(chatId, text, options),
      edit: (chatId, id, text, options) => inner.edit(chatId, id, text, options),
      finishStream: (chatId, id, text) => inner.finishStream!(chatId, id, text),
      typing: (chatId) => inner.typing(chatId),
    };
    const errcodeOf: Record<FailureKind, number> = { "rate-limit": 45009, formatting: 40008, forbidden: 48002, "not-found": 86001, network: -1 };
    return {
      adapter,
      secrets: [secret],
      owner,
      stranger,
      ownerChat: owner,
      strangerChat: stranger,
      group,
      async say(from, where, text, options = {}) {
        fake.say({ from: from === "owner" ? owner : stranger, text, ...(where === "group" ? { group, mention: options.mention === true } : {}) });
      },
      shown: (chatId) => fake.shown(chatId),
      failNext(operation, kind) {
        // A stream's text is not markup WeCom checks: it never refuses an update for it.
        if (operation === "edit" && kind === "formatting") return false;
        fake.failNext(operation === "send" ? "send" : "respond", errcodeOf[kind], `refused ${secret}`);
        return true;
      },
      idempotent: false,
      editableSend: { idempotencyKey: "conformance-reply#draft" },
      waitFor: (predicate, what) => fake.waitFor(predicate, { what }),
      async close() {
        await inner.stop();
        await fake.close();
      },
    };
  },
};
