/**
 * Streamed replies as a DingTalk AI card, updated in place (the card API DingTalk's own SDKs use):
 *
 * 1. open: `POST /v1.0/card/instances/createAndDeliver` puts a card of the template into the group
 *    (`IM_GROUP`) or the one-to-one chat (`IM_ROBOT`), already `flowStatus` 2 (inputting) and
 *    showing the first text. The card's `outTrackId` is ours, derived from the dispatcher's
 *    idempotency key, so a retried open names the same card;
 * 2. stream: `PUT /v1.0/card/streaming` replaces the Markdown variable with the newest text;
 * 3. finish: `PUT /v1.0/card/instances` sets `flowStatus` 3 (finished) with the final text.
 *
 * The dispatcher edits the final text in, or, when the last streamed text already equals it, tells
 * the adapter so (`finishStream`): either way the card is finished at once. A card no update
 * reached for `settleMs` (a final that never came: the turn failed) is finished here with the text
 * it shows. A card updated after it was finished (a long pause
 * mid-reply, or another gateway's card after a failover) is set inputting again first.
 * Each card's calls run one after the other.
 */
import { createHash, randomUUID } from "node:crypto";
import type { Logger } from "pino";
import { ChannelError, errorMessage } from "../../src/errors.js";
import { KeyedLanes } from "../../src/gateway/kit/index.js";
import type { ChatRoute } from "./chat-route.js";
import type { DingTalkApi } from "./open-api.js";

export interface CardStreamerOptions {
  api: DingTalkApi;
  robotCode: string;
  templateId: string;
  /** The template's streamed Markdown variable. */
  contentKey: string;
  settleMs: number;
  logger: Logger;
}

export interface CardStreamer {
  /** Creates and delivers a card showing `text`; resolves with its platform message id (`card:<outTrackId>`). */
  open(route: ChatRoute, idempotencyKey: string, text: string): Promise<string>;
  /** Shows `text` in the card, streaming (`final`: and marks it finished). */
  update(platformMessageId: string, text: string, final: boolean): Promise<void>;
  /** Finishes the card with `text` if it is still open (the dispatcher's `finishStream`). */
  settle(platformMessageId: string, text: string): Promise<void>;
  /** Finishes at once the cards waiting to settle (stopping). */
  settleAll(): Promise<void>;
}

const CARD_PREFIX = "card:";
const FlowStatus = { inputting: "2", finished: "3" } as const;

export const isCardId = (platformMessageId: string) => platformMessageId.startsWith(CARD_PREFIX);

export function outTrackIdOf(idempotencyKey: string): string {
  return `countbot-${createHash("sha256").update(idempotencyKey).digest("hex").slice(0, 32)}`;
}

interface CardState {
  inputting: boolean;
  text: string;
  timer?: NodeJS.Timeout;
}

interface DeliverResult {
  success?: boolean;
  errorMsg?: string;
}

export function createCardStreamer(options: CardStreamerOptions): CardStreamer {
  const { api, contentKey, logger } = options;
  const cards = new Map<string, CardState>();
  const lanes = new KeyedLanes();

  const setStatus = (outTrackId: string, cardParamMap: Record<string, string>) =>
    api.call("card.update", "PUT", "/v1.0/card/instances", { outTrackId, cardData: { cardParamMap }, cardUpdateOptions: { updateCardDataByKey: true } });

  function settleLater(outTrackId: string, state: CardState): void {
    clearTimeout(state.timer);
    state.timer = setTimeout(() => {
      void lanes.run(outTrackId, () => finish(outTrackId, state.text)).catch((error: unknown) => {
        logger.warn({ channel: "dingtalk", outTrackId, error: errorMessage(error) }, "dingtalk card not marked finished");
      });
    }, options.settleMs);
    state.timer.unref();
  }

  async function finish(outTrackId: string, text: string): Promise<void> {
    clearTimeout(cards.get(outTrackId)?.timer);
    await setStatus(outTrackId, { flowStatus: FlowStatus.finished, [contentKey]: text });
    cards.delete(outTrackId);
  }

  async function stream(outTrackId: string, text: string): Promise<void> {
    const state = cards.get(outTrackId) ?? { inputting: false, text };
    if (!state.inputting) await setStatus(outTrackId, { flowStatus: FlowStatus.inputting });
    state.inputting = true;
    cards.set(outTrackId, state);
    await api.call("card.streaming", "PUT", "/v1.0/card/streaming", { outTrackId, guid: randomUUID(), key: contentKey, content: text, isFull: true, isFinalize: false, isError: false });
    state.text = text;
    settleLater(outTrackId, state);
  }

  function target(route: ChatRoute): Record<string, unknown> {
    if (route.kind === "group") return { openSpaceId: `dtv1.card//IM_GROUP.${route.conversationId}`, imGroupOpenDeliverModel: { robotCode: options.robotCode } };
    if (route.kind === "user") return { openSpaceId: `dtv1.card//IM_ROBOT.${route.staffId}`, imRobotOpenDeliverModel: { spaceType: "IM_ROBOT", robotCode: options.robotCode } };
    throw new ChannelError("dingtalk cards need a user id or a group: this chat is answered through its session webhook", "dingtalk");
  }

  return {
    async open(route, idempotencyKey, text) {
      const outTrackId = outTrackIdOf(idempotencyKey);
      const delivery = target(route);
      return lanes.run(outTrackId, async () => {
        const answer = await api.call<{ result?: { deliverResults?: DeliverResult[] } }>("card.createAndDeliver", "POST", "/v1.0/card/instances/createAndDeliver", {
          cardTemplateId: options.templateId,
          outTrackId,
          cardData: { cardParamMap: { flowStatus: FlowStatus.inputting, [contentKey]: text } },
          callbackType: "STREAM",
          imGroupOpenSpaceModel: { supportForward: true },
          imRobotOpenSpaceModel: { supportForward: true },
          userIdType: 1,
          ...delivery,
        });
        const refused = answer.result?.deliverResults?.find((result) => result.success === false);
        if (refused) throw new ChannelError(`dingtalk card not delivered: ${refused.errorMsg ?? "no reason given"}`, "dingtalk", { kind: "forbidden" });
        const state: CardState = { inputting: true, text };
        cards.set(outTrackId, state);
        settleLater(outTrackId, state);
        return `${CARD_PREFIX}${outTrackId}`;
      });
    },
    async update(platformMessageId, text, final) {
      const outTrackId = platformMessageId.slice(CARD_PREFIX.length);
      await lanes.run(outTrackId, () => (final ? finish(outTrackId, text) : stream(outTrackId, text)));
    },
    async settle(platformMessageId, text) {
      const outTrackId = platformMessageId.slice(CARD_PREFIX.length);
      await lanes.run(outTrackId, async () => {
        if (cards.has(outTrackId)) await finish(outTrackId, text);
      });
    },
    async settleAll() {
      const open = [...cards.entries()];
      await Promise.all(
        open.map(([outTrackId, state]) =>
          lanes.run(outTrackId, () => finish(outTrackId, state.text)).catch((error: unknown) => {
            logger.warn({ channel: "dingtalk", outTrackId, error: errorMessage(error) }, "dingtalk card not marked finished");
          }),
        ),
      );
    },
  };
}
