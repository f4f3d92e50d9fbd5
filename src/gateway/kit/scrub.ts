/**
 * One scrubber for every platform: a platform's credentials (a bot token in Telegram's URLs, an
 * app secret in Feishu's token requests) can surface in an SDK's error message or stack, and no
 * error text may carry one out of the adapter (into a log, a ChannelError, a reply).
 */

/** Replaces every known secret in a text. */
export type Scrub = (text: string) => string;

export interface ScrubberOptions {
  /** What a secret is replaced by. Default `[secret]`. */
  replacement?: string;
  /** Shapes of short-lived secrets derived from the configured ones (Feishu's `t-…` tenant tokens). */
  patterns?: readonly RegExp[];
}

/**
 * A scrubber for `secrets` (absent or shorter than 4 characters are ignored: too short to be a
 * credential, too likely to occur in ordinary text), each as is and URL-encoded.
 */
export function createScrubber(secrets: ReadonlyArray<string | undefined>, options: ScrubberOptions = {}): Scrub {
  const replacement = options.replacement ?? "[secret]";
  const forms = [
    ...new Set(secrets.filter((secret): secret is string => typeof secret === "string" && secret.length >= 4).flatMap((secret) => [secret, encodeURIComponent(secret)])),
  ].sort((a, b) => b.length - a.length); // the longer form first, so an encoded secret is not half replaced
  const patterns = (options.patterns ?? []).map((pattern) => new RegExp(pattern.source, pattern.flags.includes("g") ? pattern.flags : `${pattern.flags}g`));
  return (text) => {
    let result = forms.reduce((current, form) => current.split(form).join(replacement), text);
    for (const pattern of patterns) result = result.replace(pattern, replacement);
    return result;
  };
}

/** Scrubs an error's message and stack, and its causes', in place, so a logged cause cannot leak a secret. */
export function scrubError(error: unknown, scrub: Scrub, depth = 0): void {
  if (!(error instanceof Error) || depth > 3) return;
  error.message = scrub(error.message);
  if (error.stack) error.stack = scrub(error.stack);
  scrubError(error.cause, scrub, depth + 1);
}
