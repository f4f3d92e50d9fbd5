/**
 * The model's reasoning, relayed to the chat as notices marked `metadata.reasoning` (with
 * `agent.showReasoning`): the terminal and the web console show them dimmed; the dispatcher of
 * every other platform drops notices. Reasoning is published in pieces as it streams (at a
 * paragraph's end once a piece is long enough, or when it grows long), and whatever is left when
 * the answer, a tool call or the end of the turn comes. It never joins the reply or the history.
 */
import type { TurnListener } from "./react-loop.js";

/** A paragraph ends a piece once the piece is this long. */
const MIN_PIECE_CHARS = 200;
/** Without a paragraph's end, a piece goes out at this length. */
const MAX_PIECE_CHARS = 2_000;

export class ReasoningRelay {
  private buffer = "";

  constructor(private readonly publish: (text: string) => Promise<void>) {}

  /** More reasoning; publishes a piece when one is ready. */
  async append(text: string): Promise<void> {
    this.buffer += text;
    if (this.buffer.length >= MAX_PIECE_CHARS) return this.flush();
    const paragraphEnd = this.buffer.lastIndexOf("\n\n");
    if (paragraphEnd >= MIN_PIECE_CHARS) {
      const piece = this.buffer.slice(0, paragraphEnd);
      this.buffer = this.buffer.slice(paragraphEnd + 2);
      await this.send(piece);
    }
  }

  /** Publishes what is left (the reasoning ended: text, a tool call or the turn's end came). */
  async flush(): Promise<void> {
    const piece = this.buffer;
    this.buffer = "";
    await this.send(piece);
  }

  private async send(piece: string): Promise<void> {
    const text = piece.trim();
    if (text !== "") await this.publish(text);
  }
}

/**
 * `listener` with the turn's reasoning relayed through `publish`: reasoning events go to the relay,
 * and what it holds goes out before any other event (the answer's text, a tool call, the end).
 */
export function relayingReasoning(listener: TurnListener, publish: (text: string) => Promise<void>): TurnListener {
  const relay = new ReasoningRelay(publish);
  return async (event) => {
    if (event.type === "reasoning") return relay.append(event.text);
    await relay.flush();
    await listener(event);
  };
}
