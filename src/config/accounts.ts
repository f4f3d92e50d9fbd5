/**
 * Several accounts of one platform (`channels.telegram.accounts: [{ id, token, … }]`): two bots on
 * Telegram, a support app and an engineering app on Feishu. The section's own fields are shared by
 * every account; an account's fields replace them (field by field, the top level only).
 *
 * An account is a channel of its own on the bus, named `<platform>.<account>` (`telegram.support`),
 * so its chats are sessions of their own (`telegram.support:-100123`: two bots in one group are two
 * sessions), and its leader lease, delivery dedupe, send budgets and health are its own. The account
 * `default` keeps the platform's bare name: a deployment that grows a second bot keeps the first
 * one's sessions by naming it `default`.
 */
import { z } from "zod";

/** The account of the single-account form, and the one whose channel keeps the platform's name. */
export const DEFAULT_ACCOUNT = "default";

export const AccountIdSchema = z.string().regex(/^[A-Za-z0-9][\w-]{0,31}$/, "1-32 letters, digits, _ and - (starting with a letter or digit)");

/** One entry of `accounts`: its id, and any field of the section, which replaces the shared one. */
const AccountEntrySchema = z
  .looseObject({
    id: AccountIdSchema.describe("Names the account: its chats are the sessions `<platform>.<id>:<chat>` (`default`: `<platform>:<chat>`), routing rules match it, status and metrics show it."),
    enabled: z.boolean().optional().describe("Run this account (default: as the section says)."),
  })
  .describe("One account: `id` and any field of the section, which replaces the section's own for this account.");

/** What the config layer needs of a channel plugin to take accounts. */
export interface AccountsSpec {
  readonly name: string;
  readonly configSchema: z.ZodType;
  /** The path of the HTTP callback a section (one account's) is served on, when it takes one. */
  webhookPath?(section: never): string | undefined;
}

/** One account of a channel section, with the section it runs on and the bus channel it is. */
export interface ChannelAccount {
  /** The account's id (`default` in the single-account form). */
  id: string;
  /** The bus channel it is: `telegram` for `default`, `telegram.support` otherwise. */
  channel: string;
  /** The merged section (shared fields and the account's own), as the plugin's schema reads it. */
  section: Record<string, unknown>;
  /** The config path the account's fields live at, for errors. */
  path: string;
}

/** The bus channel name of a platform's account. */
export function accountChannel(platform: string, account: string): string {
  return account === DEFAULT_ACCOUNT ? platform : `${platform}.${account}`;
}

/** The platform and account a bus channel name stands for (`telegram.support` → telegram, support). */
export function splitChannel(channel: string): { platform: string; account: string } {
  const dot = channel.indexOf(".");
  return dot < 0 ? { platform: channel, account: DEFAULT_ACCOUNT } : { platform: channel.slice(0, dot), account: channel.slice(dot + 1) };
}

/**
 * A plugin's section schema that also takes `accounts`. Each account's merged section is checked
 * with the plugin's own schema (its errors named `channels.<name>.accounts[i].<field>`), ids must
 * be unique. A schema that is not an object takes no accounts.
 */
export function withAccounts(spec: AccountsSpec): z.ZodType {
  const schema = spec.configSchema;
  if (!(schema instanceof z.ZodObject)) return schema;
  return schema
    .safeExtend({
      accounts: z
        .array(AccountEntrySchema)
        .min(1)
        .optional()
        .describe(`Several accounts of this platform, each its own bot with its own credentials, allowlists and webhook path (see README, Several bots). The section's fields are shared by every account.`),
    })
    .superRefine((section, context) => {
      const { accounts } = section as { accounts?: Array<{ id: string }> };
      const seen = new Set<string>();
      for (const [index, account] of (accounts ?? []).entries()) {
        if (seen.has(account.id)) context.addIssue({ code: "custom", path: ["accounts", index, "id"], message: `a second account "${account.id}": account ids must be unique` });
        seen.add(account.id);
        const merged = schema.safeParse(mergeAccount(section as Record<string, unknown>, account));
        for (const issue of merged.success ? [] : merged.error.issues) {
          context.addIssue({ code: "custom", path: ["accounts", index, ...issue.path.filter((key) => typeof key !== "symbol")], message: issue.message });
        }
      }
    });
}

/** A section's accounts: the single-account form is the one account `default`. */
export function accountsOf(platform: string, section: Record<string, unknown>): ChannelAccount[] {
  const accounts = section.accounts as Array<{ id: string } & Record<string, unknown>> | undefined;
  if (accounts === undefined) return [{ id: DEFAULT_ACCOUNT, channel: platform, section, path: `channels.${platform}` }];
  return accounts.map((account, index) => ({
    id: account.id,
    channel: accountChannel(platform, account.id),
    section: mergeAccount(section, account),
    path: `channels.${platform}.accounts[${index}]`,
  }));
}

function mergeAccount(section: Record<string, unknown>, account: Record<string, unknown>): Record<string, unknown> {
  const { id: _id, ...own } = account;
  return { ...sharedFields(section), ...own };
}

/** A section's fields every account shares: all but `accounts` (anything else is returned as it is). */
export function sharedFields<T>(section: T): T {
  if (typeof section !== "object" || section === null || !("accounts" in section)) return section;
  const { accounts: _accounts, ...shared } = section as Record<string, unknown>;
  return shared as T;
}

/**
 * Two accounts (of one platform or of two) served on one webhook path: the second would never get
 * its callbacks. Returns each clash as the config path of the later one and its message.
 */
export function webhookPathClashes(specs: readonly AccountsSpec[], channels: Record<string, unknown>): Array<{ path: (string | number)[]; message: string }> {
  const owners = new Map<string, string>();
  const clashes: Array<{ path: (string | number)[]; message: string }> = [];
  for (const spec of specs) {
    const section = channels[spec.name];
    if (!spec.webhookPath || !isRecord(section) || section.enabled !== true) continue;
    for (const [index, account] of accountsOf(spec.name, section).entries()) {
      const parsed = spec.configSchema.safeParse(account.section);
      if (!parsed.success || (parsed.data as { enabled?: boolean }).enabled === false) continue;
      const webhook = spec.webhookPath(parsed.data as never);
      if (webhook === undefined) continue;
      const earlier = owners.get(webhook);
      const where = section.accounts === undefined ? [spec.name, "webhook", "path"] : [spec.name, "accounts", index, "webhook", "path"];
      if (earlier !== undefined) clashes.push({ path: where, message: `webhook path ${webhook} is ${earlier}'s already: every account needs a webhook path of its own` });
      else owners.set(webhook, account.path);
    }
  }
  return clashes;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
