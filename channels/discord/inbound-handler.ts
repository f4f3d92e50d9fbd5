/**
 * What the Discord adapter does with an event the gateway hands it: a MESSAGE_CREATE or a slash
 * command becomes a PlatformEvent and reaches the sink one at a time per chat, in order. A sink that
 * fails is retried with backoff (the gateway cannot be asked for the event again), then the event is
 * logged and dropped, and an addressed sender is told. Nothing thrown here may escape into
 * discord.js' packet handling, so every entry point catches and logs.
 */
import type { ChatInputCommandInteraction, Interaction, Message, REST } from "discord.js";
import type { Logger } from "pino";
import { type AdmissionOutcome, type EventSink, type PlatformEvent, type Scrub, type SendOptions, KeyedLanes, withRetries } from "../../src/gateway/kit/index.js";
import { errorMessage } from "../../src/errors.js";
import type { AttachmentDownloader } from "./attachment-download.js";
import { toChannelError } from "./discord-errors.js";
import { UnreadableMessageError, toPlatformEvent } from "./inbound-event.js";
import { acknowledge, commandEvent, isChatCommand, withdraw } from "./slash-commands.js";

/** Told to the sender of a message that could not be handed over: Discord will not send it again. */
export const DROPPED_NOTICE = "Sorry, I could not take that message just now. Please send it again in a minute.";

const sinkAttempts = 5;

export interface DiscordInboundOptions {
  rest: REST;
  logger: Logger;
  scrub: Scrub;
  downloader: AttachmentDownloader;
  now: () => number;
  /** Sends the dropped notice (the adapter's own `send`, so it is paced and scrubbed like any reply). */
  send: (chatId: string, text: string, options: SendOptions) => Promise<unknown>;
  inheritParent: boolean;
  registerCommands: boolean;
  handOverBackoffMs: number;
}

/** The inbound half of one running Discord adapter: the sink, the bot's identity and the per-chat order. */
export class DiscordInbound {
  /** The bot user; set on READY, before discord.js replays the messages it held back. */
  identity: { id: string; username: string } | undefined;
  sink: EventSink | undefined;
  /** Aborted on stop: hand-overs waiting on a retry give up, as the process is going away. */
  lifetime = new AbortController();
  private readonly chats = new KeyedLanes();

  constructor(private readonly options: DiscordInboundOptions) {}

  /** Resolves once every chat's queued hand-overs have finished. */
  idle(): Promise<void> {
    return this.chats.idle();
  }

  /** The MessageCreate listener. A listener that throws would throw inside discord.js' packet handling: nothing escapes here. */
  readonly onMessage = (message: Message): void => {
    const signal = this.lifetime.signal;
    try {
      if (!this.identity || !this.sink || signal.aborted) return;
      if (message.author?.id === this.identity.id) return; // our own messages come back through the gateway
      this.inChatOrder(String(message.channelId), () => this.handleMessage(message, signal));
    } catch (error) {
      this.options.logger.warn({ channel: "discord", type: "MESSAGE_CREATE", error: errorMessage(error) }, "discord event not understood; dropped");
    }
  };

  /** The InteractionCreate listener: slash commands, when they are registered. */
  readonly onInteraction = (interaction: Interaction): void => {
    const { logger } = this.options;
    const signal = this.lifetime.signal;
    try {
      if (!this.options.registerCommands || !this.identity || !this.sink || signal.aborted) return;
      if (!interaction.isChatInputCommand() || !isChatCommand(interaction)) return;
      void this.handleCommand(interaction, signal).catch((error: unknown) => {
        logger.warn({ channel: "discord", type: "INTERACTION_CREATE", interactionId: interaction.id, error: errorMessage(error) }, "discord event not understood; dropped");
      });
    } catch (error) {
      logger.warn({ channel: "discord", type: "INTERACTION_CREATE", error: errorMessage(error) }, "discord event not understood; dropped");
    }
  };

  private inChatOrder(chatId: string, task: () => Promise<void>): void {
    void this.chats.run(chatId, task).catch(() => undefined);
  }

  /** Hands the event to the sink; retried with backoff while it throws, as the gateway will not send it again. */
  private async deliver(event: PlatformEvent, signal: AbortSignal): Promise<AdmissionOutcome | undefined> {
    const { logger } = this.options;
    const fields = { channel: "discord", chatId: event.chatId, eventId: event.eventId };
    try {
      // Stopping cuts the wait short: the event is lost then, as the process is going away.
      return await withRetries(() => this.sink!(event), {
        attempts: sinkAttempts,
        baseDelayMs: this.options.handOverBackoffMs,
        jitter: 0,
        signal,
        onRetry: (error, attempt) => logger.warn({ ...fields, attempt, error: errorMessage(error) }, "discord event hand-over failed; retrying"),
      });
    } catch (error) {
      if (signal.aborted) return undefined;
      logger.error({ ...fields, attempts: sinkAttempts, error: errorMessage(error) }, "discord event could not be handed over; dropped");
      // The sender hears it was not taken instead of silence, where the bot was addressed.
      if (event.chatType === "private" || event.mentionsBot || event.repliesToBot) {
        await this.options.send(event.chatId, DROPPED_NOTICE, { format: "plain", replyTo: event.platformMessageId, idempotencyKey: `${event.eventId}#dropped` }).catch((notice: unknown) => {
          logger.warn({ ...fields, error: errorMessage(notice) }, "could not tell the sender their message was dropped");
        });
      }
      return undefined;
    }
  }

  private async handleMessage(message: Message, signal: AbortSignal): Promise<void> {
    const { logger, downloader, now, inheritParent } = this.options;
    let event: PlatformEvent | undefined;
    try {
      event = await toPlatformEvent(message, { botId: this.identity!.id, inheritParent, downloader, now }, signal);
    } catch (error) {
      if (signal.aborted) return;
      const fields = { channel: "discord", type: "MESSAGE_CREATE", messageId: message.id, error: errorMessage(error) };
      if (error instanceof UnreadableMessageError) logger.warn(fields, "discord event not understood; dropped");
      else logger.error(fields, "discord event could not be read; dropped");
      return;
    }
    if (!event || signal.aborted) return;
    await this.deliver(event, signal);
  }

  private async handleCommand(interaction: ChatInputCommandInteraction, signal: AbortSignal): Promise<void> {
    const { rest, logger, scrub, now } = this.options;
    const fields = { channel: "discord", type: "INTERACTION_CREATE", interactionId: interaction.id, command: interaction.commandName };
    let echo: string | undefined;
    try {
      // Within Discord's 3 s, before the chat's queue: what the command produces threads to this echo.
      echo = await acknowledge(rest, interaction);
    } catch (error) {
      return logger.warn({ ...fields, error: toChannelError(error, "interactionCallback", scrub).message }, "discord slash command could not be answered; dropped");
    }
    const event = commandEvent(interaction, echo ?? interaction.id, now());
    this.inChatOrder(event.chatId, async () => {
      const outcome = await this.deliver(event, signal);
      if (outcome?.startsWith("ignored:")) {
        await withdraw(rest, interaction).catch((error: unknown) => logger.debug({ ...fields, error: toChannelError(error, "deleteResponse", scrub).message }, "discord command echo not deleted"));
      }
    });
  }
}
