/**
 * The platform accounts a gateway runs (src/config/accounts.ts): each enabled account of each
 * enabled channel section, built by its plugin under its bus channel name, and a config reload's
 * changes to them. A reload connects an added account and stops a removed one, each alone: the
 * other accounts' connections and leases are not touched. An account served on a webhook path
 * changes only with a restart (the HTTP server's routes are fixed once it listens); a removed one's
 * path answers 404 from then on.
 */
import type { Logger } from "pino";
import { type ChannelAccount, DEFAULT_ACCOUNT, accountsOf, sharedFields } from "../config/accounts.js";
import type { ResolvedConfig } from "../config/schema.js";
import { ConfigError, errorMessage } from "../errors.js";
import type { ChannelConfig, ChannelDependencies, ChannelInstance, ChannelPlugin, ChannelWebhook } from "../gateway/channel.js";
import type { ChannelRuntime } from "../gateway/channel-runtime.js";
import { renamedAdapter } from "../gateway/renamed-adapter.js";
import { type ChatEventLog, createMemoryChatEventLog } from "../store/chat-event-log.js";

/** One account a config asks for: its plugin, its merged and parsed section, its webhook path if any. */
export interface PlannedAccount {
  plugin: ChannelPlugin;
  account: ChannelAccount;
  section: ChannelConfig;
  webhookPath?: string;
}

/** Every enabled account of every enabled channel section. Throws ConfigError naming the section. */
export function planAccounts(config: ResolvedConfig, plugins: readonly ChannelPlugin[]): PlannedAccount[] {
  const planned: PlannedAccount[] = [];
  for (const plugin of plugins) {
    const raw = config.channels[plugin.name];
    // Loading validated the section against the plugin's schema; a missing section takes the
    // schema's defaults when it has them (the web chat is on unless switched off).
    const shared = plugin.configSchema.safeParse(sharedFields(raw));
    if (!shared.success) {
      if (raw === undefined) continue;
      throw new ConfigError(`channels.${plugin.name}: ${shared.error.issues[0]?.message ?? "invalid"}`, `channels.${plugin.name}`);
    }
    if (!(shared.data as ChannelConfig).enabled) continue;
    for (const account of accountsOf(plugin.name, (raw ?? shared.data) as Record<string, unknown>)) {
      const parsed = plugin.configSchema.safeParse(account.section);
      if (!parsed.success) throw new ConfigError(`${account.path}: ${parsed.error.issues[0]?.message ?? "invalid"}`, account.path);
      const section: ChannelConfig = parsed.data;
      if (!section.enabled) continue;
      const webhookPath = plugin.webhookPath?.(section);
      planned.push({ plugin, account, section, ...(webhookPath === undefined ? {} : { webhookPath }) });
    }
  }
  return planned;
}

/** Builds one planned account's channel under its bus channel name. */
export async function createAccount(planned: PlannedAccount, dependencies: ChannelDependencies & { eventLogOf?: (channel: string) => ChatEventLog }): Promise<ChannelInstance> {
  const { plugin, account, section } = planned;
  const logger = account.id === DEFAULT_ACCOUNT ? dependencies.logger : dependencies.logger.child({ account: account.id });
  const events = (dependencies.eventLogOf ?? (() => createMemoryChatEventLog()))(account.channel);
  const instance = await plugin.create(section, { ...dependencies, logger, events }).catch((error: unknown) => {
    throw inAccount(error, plugin.name, account);
  });
  return { ...instance, adapter: renamedAdapter(instance.adapter, account.channel) };
}

/**
 * A plugin's config error about its section, said of the account it was building:
 * `channels.telegram.token` becomes `channels.telegram.accounts[1].token`.
 */
function inAccount(error: unknown, platform: string, account: ChannelAccount): unknown {
  const section = `channels.${platform}`;
  if (!(error instanceof ConfigError) || account.path === section) return error;
  const rename = (text: string) => text.split(`${section}.`).join(`${account.path}.`).split(`${section} `).join(`${account.path} `);
  return new ConfigError(rename(error.message), error.path === undefined ? account.path : rename(`${error.path} `).trimEnd(), { cause: error });
}

/**
 * The channels whose config section says `enabled`, one per account, each built by its plugin
 * (which imports its adapter and SDK only then). Rejects with ConfigError.
 */
export async function createChannels(
  config: ResolvedConfig,
  logger: Logger,
  bus: ChannelDependencies["bus"],
  plugins: readonly ChannelPlugin[],
  now?: () => number,
  eventLogOf?: (channel: string) => ChatEventLog,
): Promise<ChannelInstance[]> {
  const instances: ChannelInstance[] = [];
  for (const planned of planAccounts(config, plugins)) instances.push(await createAccount(planned, { logger, dataDir: config.dataDir, bus, now, eventLogOf }));
  return instances;
}

export interface AccountSyncOptions {
  plugins: readonly ChannelPlugin[];
  logger: Logger;
  /** The running channels: added to and removed from in place. */
  channels: ChannelRuntime[];
  /** Builds a runtime for an account a reload added (not started). */
  build(planned: PlannedAccount): Promise<ChannelRuntime>;
  /** The config the running channels were built from. */
  initial: ResolvedConfig;
}

/**
 * Applies a reloaded config's accounts: connects the added ones, stops the removed ones, and
 * reconnects one whose section changed beyond its admission policy (new credentials, mode,
 * limits), each alone. A policy-only change is applied in place by the caller.
 */
export function createAccountSync(options: AccountSyncOptions): { sync(next: ResolvedConfig): Promise<void>; guardWebhook(name: string, webhook: ChannelWebhook): ChannelWebhook } {
  const { channels, logger } = options;
  const removed = new Set<string>();
  // Each running account's section as built, to tell what a reload changed.
  const built = new Map(planAccounts(options.initial, options.plugins).map((account) => [account.account.channel, account]));
  const stop = async (runtime: ChannelRuntime) => {
    channels.splice(channels.indexOf(runtime), 1);
    built.delete(runtime.name);
    await runtime.stop();
  };
  const start = async (account: PlannedAccount, verb: string) => {
    try {
      const runtime = await options.build(account);
      built.set(account.account.channel, account);
      channels.push(runtime);
      removed.delete(account.account.channel);
      await runtime.start();
      logger.info({ channel: account.account.channel }, `account ${verb} by a config reload`);
    } catch (error) {
      logger.error({ channel: account.account.channel, err: errorMessage(error) }, `account ${verb} by a config reload could not be built`);
    }
  };
  return {
    guardWebhook(name, webhook) {
      return { path: webhook.path, handle: (request) => (removed.has(name) ? Promise.resolve({ status: 404, body: { error: "this account was removed from the config" } }) : webhook.handle(request)) };
    },
    async sync(next) {
      let planned: PlannedAccount[];
      try {
        planned = planAccounts(next, options.plugins);
      } catch (error) {
        logger.error({ err: error }, "the reloaded accounts were not applied");
        return;
      }
      const wanted = new Map(planned.map((account) => [account.account.channel, account]));
      for (const runtime of [...channels]) {
        const account = wanted.get(runtime.name);
        const before = built.get(runtime.name);
        if (account && (!before || !changedBeyondPolicy(before, account))) continue;
        if (account && (before?.webhookPath !== undefined || account.webhookPath !== undefined)) {
          logger.warn({ channel: runtime.name }, "account changed by a config reload: it takes a webhook, so its new settings apply with the next restart (its admission policy applies now)");
          continue;
        }
        await stop(runtime);
        if (account) await start(account, "reconnected with new settings");
        else {
          removed.add(runtime.name);
          logger.info({ channel: runtime.name }, "account removed by a config reload: stopped");
        }
      }
      for (const [name, account] of wanted) {
        if (channels.some((runtime) => runtime.name === name)) continue;
        if (account.webhookPath !== undefined) {
          logger.warn({ channel: name, webhookPath: account.webhookPath }, "account added by a config reload takes a webhook: it starts with the next restart");
          continue;
        }
        await start(account, "added");
      }
    },
  };
}

/**
 * Whether a section changed in a field that is not only its admission policy's: each changed field
 * is tried alone on the old section, and one that leaves the policy as it was needs a reconnect.
 */
function changedBeyondPolicy(before: PlannedAccount, after: PlannedAccount): boolean {
  const old = before.account.section;
  const changed = [...new Set([...Object.keys(old), ...Object.keys(after.account.section)])].filter((key) => JSON.stringify(old[key]) !== JSON.stringify(after.account.section[key]));
  if (changed.length === 0) return false;
  const policyOf = after.plugin.policy;
  if (!policyOf) return true;
  const parse = (section: Record<string, unknown>) => after.plugin.configSchema.safeParse(section);
  const basePolicy = JSON.stringify(policyOf(before.section));
  return changed.some((key) => {
    const tried = parse({ ...old, [key]: after.account.section[key] });
    return !tried.success || JSON.stringify(policyOf(tried.data)) === basePolicy;
  });
}
