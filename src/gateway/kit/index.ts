/**
 * The channel kit: everything a platform folder (`channels/<name>/`) may use from the core, in one
 * import. Besides this file a platform imports only the message model (`src/bus/message.ts`),
 * the errors (`src/errors.ts`) and its own SDK, which no other folder may import; the layer rules
 * in `.dependency-cruiser.cjs` hold both, and `tests/unit/layering.test.ts` proves they bite.
 *
 * What is here, grouped by what a platform author needs it for:
 * - the contract: the plugin, adapter, event and policy types (`../channel.ts`);
 * - text: splitting a reply into messages that fit, the chat commands every channel understands;
 * - groups: the `groupContext` and `teamProgress` settings every chat platform's section takes;
 * - order and memory: a serial lane (per chat), expiring sets for dedupe;
 * - I/O: capped downloads, one error scrubber for credentials, retries with back-off, webhook helpers, JSON
 *   calls with a timeout, a cached app access token (fetched once at a time, bought anew before it runs out),
 *   a scrubber that also hides issued tokens, and transport failures mapped onto ChannelError;
 * - budgets: the platform's published send limits, declared once (`defineQuotas`), overridable
 *   in its config section (`limitsSchema`, `withLimits`); the runtime's send governor keeps every
 *   call within them;
 * - the web page's event log (the web channel keeps what its users must not miss).
 */
export {
  type AdmissionOutcome,
  type AdmissionPolicy,
  type ChannelAdapter,
  type ChannelCapabilities,
  type ChannelConfig,
  type ChannelDependencies,
  type ChannelInstance,
  type ChannelPlugin,
  type ChannelWebhook,
  type ChatType,
  type EventSink,
  type IgnoredReason,
  type OutboundPart,
  type PlatformEvent,
  type RateLimit,
  type RenderedText,
  type SendOptions,
  compositeKey,
  defineChannel,
} from "../channel.js";
export { type SplitOptions, splitMessage } from "../split-message.js";
export { quoteLines, renderListLines } from "./markdown-blocks.js";
export { type GroupContextSetting, type TeamProgressSetting, groupSettingsShape } from "../group-settings.js";
export { type ChatCommand, helpText, parseCommand } from "../../bus/commands.js";
export { ChatLane, KeyedLanes } from "../../bus/chat-lane.js";
export { ExpiringMap } from "../../bus/expiring-map.js";
export { ExpiringSet } from "../../bus/expiring-set.js";
export type { Subscription } from "../../bus/message-bus.js";
export { sleep } from "../../sleep.js";
export { AccessTokenCache, type FetchedToken } from "./access-token.js";
export { type JsonAnswer, readJsonBody, requestJson } from "./json-request.js";
export { draftIdOf } from "./draft-id.js";
export { type IssuedSecretScrubber, createIssuedSecretScrubber, isNetworkFailure, transportFailure } from "./platform-failure.js";
export { type SaveDownloadOptions, TooBigError, formatBytes, safeAttachmentName, saveDownload } from "./download.js";
export { type RetryOptions, backoffDelay, withRetries } from "./retry.js";
export { type Scrub, type ScrubberOptions, createScrubber, scrubError } from "./scrub.js";
export { type BodyCheck, checkJsonBody, headerValue, sameSecret } from "./webhook.js";
export { RequestError, parseRequest } from "../http-request.js";
export { type ImageBodyLimits, createImageBodyGate } from "../body-gate.js";
export {
  type LimitOverrides,
  type PlatformCall,
  type PlatformQuotas,
  type QuotaScope,
  type QuotaScopeKind,
  defineQuotas,
  describeQuotas,
  limitsSchema,
  withLimits,
} from "../quotas.js";
export type { GovernedCall, SendGovernor, TryOutcome } from "../send-governor.js";
export {
  type AppendedEvent,
  type ChatEventLog,
  EVENT_ID_PATTERN,
  compareEventIds,
  createMemoryChatEventLog,
} from "../../store/chat-event-log.js";
