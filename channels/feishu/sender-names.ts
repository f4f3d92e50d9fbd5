/**
 * Senders' display names for group events. Feishu's events carry only ids, so the name is asked of
 * the contact API (needs the app's contact read permission), cached for an hour, an id it has no
 * name for for ten minutes; a lookup that fails or takes over 1.5 s leaves the name out (the label
 * shows the id) and is not remembered, so it is asked again next time.
 */
import type { Logger } from "pino";
import { ExpiringMap, ExpiringSet } from "../../src/gateway/kit/index.js";
import { errorMessage } from "../../src/errors.js";

/** Longest an event waits for its sender's name. */
const NAME_LOOKUP_MS = 1_500;

export class SenderNames {
  /** Display names by open_id. */
  private readonly names: ExpiringMap<string>;
  /** Ids the contact API had no name for (asked again sooner than a known name). */
  private readonly nameless: ExpiringSet;

  /** `lookup` asks the contact API; it may throw, which counts as no name. */
  constructor(
    private readonly lookup: (openId: string) => Promise<string | undefined>,
    private readonly logger: Logger,
    now: () => number,
  ) {
    this.names = new ExpiringMap<string>(60 * 60 * 1000, now, 10_000);
    this.nameless = new ExpiringSet(10 * 60 * 1000, now);
  }

  /** The name of a user's open_id (`ou_…`), or undefined when unknown, failed or slow. */
  async nameOf(openId: string): Promise<string | undefined> {
    if (!openId.startsWith("ou_") || this.nameless.has(openId)) return undefined;
    const known = this.names.get(openId);
    if (known) return known;
    const lookup = this.lookup(openId).then(
      (name) => name?.trim() ?? "",
      (error: unknown) => {
        this.logger.debug({ channel: "feishu", error: errorMessage(error) }, "feishu sender name lookup failed");
        return "";
      },
    );
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<undefined>((resolve) => (timer = setTimeout(() => resolve(undefined), NAME_LOOKUP_MS)));
    const name = await Promise.race([lookup, timeout]).finally(() => clearTimeout(timer));
    if (name === undefined) return undefined; // slow: not remembered, asked again next time
    if (name === "") this.nameless.add(openId);
    else this.names.set(openId, name);
    return name || undefined;
  }
}
