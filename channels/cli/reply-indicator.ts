/**
 * "thinking… 4s": what the terminal shows while a reply is awaited, so a slow or unreachable model
 * is not silence. A yocto-spinner line below the conversation with the seconds since the line was
 * sent; the chat hides it before it prints anything (streamed text, a tool line) and shows it again
 * while the turn goes on.
 */
import type { Writable } from "node:stream";
import yoctoSpinner, { type Spinner } from "yocto-spinner";

/** The chat's view of the indicator; tests hand in their own. */
export interface ReplyIndicator {
  /** Shows (or updates) the indicator: `label… Ns`, counted from `since`. */
  show(label: string, since: number): void;
  /** Removes it from the screen; nothing else is printed over it. */
  hide(): void;
}

export interface SpinnerIndicatorOptions {
  stream: NodeJS.WritableStream;
  now?: () => number;
  /** Dim the text. */
  color: boolean;
}

/**
 * Whether a spinner can draw on `stream`: a terminal that moves its cursor, not a CI log (where
 * yocto-spinner would print a line per update).
 */
export function canAnimate(stream: NodeJS.WritableStream & { isTTY?: boolean }, env: NodeJS.ProcessEnv = process.env): boolean {
  return Boolean(stream.isTTY) && env.TERM !== "dumb" && !("CI" in env);
}

export function createSpinnerIndicator(options: SpinnerIndicatorOptions): ReplyIndicator {
  const now = options.now ?? Date.now;
  let spinner: Spinner | undefined;
  let ticker: NodeJS.Timeout | undefined;
  let text = () => "";
  const dim = (line: string) => (options.color ? `\x1b[2m${line}\x1b[22m` : line);
  return {
    show(label, since) {
      text = () => dim(`${label}… ${Math.max(0, Math.floor((now() - since) / 1000))}s  (Ctrl-C stops it)`);
      if (spinner) {
        spinner.text = text();
        return;
      }
      // No signal handlers of its own: Ctrl-C is the chat's (it stops the reply, twice exits).
      spinner = yoctoSpinner({ stream: options.stream as Writable, text: text(), handleSignals: false }).start();
      ticker = setInterval(() => {
        if (spinner) spinner.text = text();
      }, 1_000);
      ticker.unref();
    },
    hide() {
      if (ticker) clearInterval(ticker);
      ticker = undefined;
      spinner?.stop();
      spinner = undefined;
    },
  };
}
