/**
 * A reply cut into chunks the platform takes, each rendered in the platform's markup. Finals are
 * sent chunk by chunk (dispatcher.ts); a streamed draft shows only the first (draft-delivery.ts).
 *
 * Each chunk keeps its source beside the rendering: a chunk whose markup the platform refuses is
 * sent again as its source, so a chunk must fit the platform's limit both ways.
 */
import type { ChannelAdapter, RenderedText, SendOptions } from "./channel.js";
import { splitMessage } from "./split-message.js";

/** One chunk of a text: what was written, and what the platform is sent. */
export interface RenderedChunk {
  source: string;
  rendered: string;
  format: SendOptions["format"];
}

/** The chunks of a text, each rendered, measured as the platform counts (`plain`: not rendered at all). */
export function renderedChunksOf(
  adapter: Pick<ChannelAdapter, "render" | "measure">,
  text: string,
  maxLength: number,
  plain = false,
): RenderedChunk[] {
  const render = plain ? asPlain : (adapter.render?.bind(adapter) ?? asPlain);
  const measured = plain ? undefined : adapter.measure?.bind(adapter);
  // The plain fallback sends the source as is, so a chunk must fit both ways.
  const measure = (chunk: string) => Math.max(chunk.length, measured ? measured(chunk) : render(chunk).text.length);
  return splitMessage(text, maxLength, { measure }).map((source) => {
    const rendered = render(source);
    return { source, rendered: rendered.text, format: rendered.format };
  });
}

/** A platform without a renderer of its own shows the text as it is. */
function asPlain(text: string): RenderedText {
  return { text, format: "plain" };
}
