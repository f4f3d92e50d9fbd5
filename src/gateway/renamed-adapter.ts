/**
 * A platform account's adapter under its bus channel name (`telegram.support`, see
 * src/config/accounts.ts): the plugin builds its adapter under the platform's name, and the runtime
 * (admission, dispatcher, drafts, leases, health, metrics) knows it by the account's. Every call
 * goes to the adapter itself; what it lacks stays absent.
 */
import type { ChannelAdapter } from "./channel.js";

const optional = ["finishStream", "draft", "render", "measure", "callsFor", "watchConnection", "botUsername", "probe"] as const;

export function renamedAdapter(adapter: ChannelAdapter, name: string): ChannelAdapter {
  if (adapter.name === name) return adapter;
  const renamed: { -readonly [K in keyof ChannelAdapter]: ChannelAdapter[K] } = {
    name,
    get capabilities() {
      return adapter.capabilities;
    },
    start: (sink) => adapter.start(sink),
    stop: () => adapter.stop(),
    send: (chatId, text, options) => adapter.send(chatId, text, options),
    edit: (chatId, platformMessageId, text, options) => adapter.edit(chatId, platformMessageId, text, options),
    typing: (chatId) => adapter.typing(chatId),
  };
  for (const key of optional) {
    const method = adapter[key];
    if (typeof method === "function") Object.assign(renamed, { [key]: method.bind(adapter) });
  }
  return renamed;
}
