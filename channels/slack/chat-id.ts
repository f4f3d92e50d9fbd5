/**
 * A Slack chat id says where its replies go, with nothing but the id (a background job's result,
 * another gateway after a failover):
 *
 * - a channel, a private channel, a group DM or a DM: its conversation id as it is (`C…`, `G…`, `D…`);
 * - a thread: `<channel>:<thread_ts>`, its own session; replies are posted into the thread.
 */
export interface SlackTarget {
  channel: string;
  threadTs?: string;
}

export function chatIdOf(channel: string, threadTs?: string): string {
  return threadTs ? `${channel}:${threadTs}` : channel;
}

export function targetOf(chatId: string): SlackTarget {
  const at = chatId.indexOf(":");
  return at === -1 ? { channel: chatId } : { channel: chatId.slice(0, at), threadTs: chatId.slice(at + 1) };
}

/** A DM's conversation id starts with D. */
export const isDirect = (channel: string) => channel.startsWith("D");
