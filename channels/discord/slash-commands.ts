/**
 * The chat commands as Discord slash commands (`registerCommands`): /new, /stop, /status and /help
 * registered globally (bulk overwrite, so a restart changes nothing), and an invocation turned into
 * the same PlatformEvent a typed `/new` would be.
 *
 * Discord wants an answer to an interaction within 3 s, before the command has run anywhere. The
 * answer is the command itself, shown as a message of the bot (`/new`), and what the command
 * produces (admission's help text, the worker's "new session") is a reply to that message. When
 * admission drops the invocation (a sender not allowed, say), the echo is deleted again.
 */
import { ApplicationCommandType, ChannelType, type ChatInputCommandInteraction, type GuildMember, InteractionContextType, type REST, Routes } from "discord.js";
import type { Logger } from "pino";
import type { ChatType, PlatformEvent } from "../../src/gateway/kit/index.js";

export const slashCommands = [
  { name: "new", description: "Start a new conversation (the old one is archived)" },
  { name: "stop", description: "Stop the reply that is being written" },
  { name: "status", description: "Show this conversation's state" },
  { name: "help", description: "List the commands" },
] as const;

const names: ReadonlySet<string> = new Set(slashCommands.map((command) => command.name));

export function isChatCommand(interaction: ChatInputCommandInteraction): boolean {
  return names.has(interaction.commandName);
}

/** Registers the commands for guilds and DMs with the bot. Resolves whether it worked; never throws. */
export async function registerSlashCommands(rest: REST, applicationId: string, logger: Logger, describe: (error: unknown) => string): Promise<boolean> {
  const body = slashCommands.map((command) => ({
    ...command,
    type: ApplicationCommandType.ChatInput,
    contexts: [InteractionContextType.Guild, InteractionContextType.BotDM],
  }));
  try {
    await rest.put(Routes.applicationCommands(applicationId), { body });
    logger.info({ channel: "discord", commands: slashCommands.map((command) => `/${command.name}`) }, "discord slash commands registered");
    return true;
  } catch (error) {
    logger.warn({ channel: "discord", error: describe(error) }, "discord slash commands could not be registered; typed commands still work");
    return false;
  }
}

/** Answers the interaction with the command as said; resolves with the id of that message. */
export async function acknowledge(rest: REST, interaction: ChatInputCommandInteraction): Promise<string | undefined> {
  const response = (await rest.post(Routes.interactionCallback(interaction.id, interaction.token), {
    body: { type: 4, data: { content: `/${interaction.commandName}`, allowed_mentions: { parse: [] } } },
    query: new URLSearchParams({ with_response: "true" }),
    // Interaction callbacks carry their token in the URL, not the bot's.
    auth: false,
  })) as { resource?: { message?: { id?: string } } } | undefined;
  return response?.resource?.message?.id;
}

/** Deletes the echo of a command admission dropped. Best effort. */
export async function withdraw(rest: REST, interaction: ChatInputCommandInteraction): Promise<void> {
  await rest.delete(Routes.webhookMessage(interaction.applicationId, interaction.token, "@original"), { auth: false });
}

function chatTypeOf(interaction: ChatInputCommandInteraction): ChatType {
  const channel = interaction.channel;
  if (!interaction.guildId || channel?.type === ChannelType.DM) return "private";
  return channel?.isThread() ? "thread" : "group";
}

/** The member's role ids, whether discord.js cached the guild (a GuildMember) or not (the raw member). */
function roleIds(interaction: ChatInputCommandInteraction): string[] {
  const member = interaction.member;
  if (!member) return [];
  if (Array.isArray(member.roles)) return member.roles;
  return [...(member as GuildMember).roles.cache.keys()];
}

/** The event of a command invocation; `platformMessageId` is the echo the replies thread to. */
export function commandEvent(interaction: ChatInputCommandInteraction, platformMessageId: string, now: number): PlatformEvent {
  const chatType = chatTypeOf(interaction);
  const channelId = interaction.channelId;
  const event: PlatformEvent = {
    eventId: interaction.id,
    chatId: channelId,
    chatType,
    senderId: interaction.user.id,
    senderName: (interaction.member as GuildMember | null)?.displayName ?? interaction.user.displayName,
    senderIsBot: interaction.user.bot,
    text: `/${interaction.commandName}`,
    // A slash command is addressed to this bot by construction.
    mentionsBot: true,
    repliesToBot: false,
    platformMessageId,
    media: [],
    receivedAt: now,
  };
  if (interaction.guildId) {
    const scopes = [`guild:${interaction.guildId}`, `channel:${channelId}`];
    const channel = interaction.channel;
    if (channel?.isThread() && channel.parentId) scopes.push(`channel:${channel.parentId}`);
    for (const roleId of roleIds(interaction)) if (roleId !== interaction.guildId) scopes.push(`role:${roleId}`);
    event.scopes = scopes;
  }
  return event;
}
