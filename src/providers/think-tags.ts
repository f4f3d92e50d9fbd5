/**
 * Reasoning that arrives inside the answer text: models served without a reasoning parser (Qwen3,
 * DeepSeek-R1 or MiniMax-M2 on Ollama, vLLM, LM Studio) open their content with
 * `<think>…</think>`. Only a think block at the very start of the content is taken as reasoning
 * (after white space); a `<think>` later in an answer is the answer's own text. Tags may arrive
 * split over several chunks.
 */
const OPEN = "<think>";
const CLOSE = "</think>";

export interface ContentPiece {
  kind: "reasoning" | "text";
  text: string;
}

export class ThinkTagSplitter {
  private state: "start" | "thinking" | "after" | "text" = "start";
  /** Held back: what may still turn out to be (part of) a tag. */
  private pending = "";

  /** What this chunk of content adds, as reasoning and answer text. */
  push(chunk: string): ContentPiece[] {
    this.pending += chunk;
    const pieces: ContentPiece[] = [];
    for (;;) {
      if (this.state === "text") {
        if (this.pending) pieces.push({ kind: "text", text: this.pending });
        this.pending = "";
        return pieces;
      }
      if (this.state === "after") {
        // The blank line models put between the think block and the answer is not the answer's.
        this.pending = this.pending.replace(/^\s+/, "");
        if (this.pending === "") return pieces;
        this.state = "text";
        continue;
      }
      if (this.state === "start") {
        const trimmed = this.pending.trimStart();
        if (trimmed.startsWith(OPEN)) {
          this.pending = trimmed.slice(OPEN.length);
          this.state = "thinking";
          continue;
        }
        // Not yet enough to tell: white space, or the start of `<think>`.
        if (OPEN.startsWith(trimmed)) return pieces;
        this.state = "text";
        continue;
      }
      const end = this.pending.indexOf(CLOSE);
      if (end !== -1) {
        if (end > 0) pieces.push({ kind: "reasoning", text: this.pending.slice(0, end) });
        this.pending = this.pending.slice(end + CLOSE.length);
        this.state = "after";
        continue;
      }
      // Keep back what could be the start of `</think>`.
      const keep = partialSuffix(this.pending, CLOSE);
      const ready = this.pending.slice(0, this.pending.length - keep);
      if (ready) pieces.push({ kind: "reasoning", text: ready });
      this.pending = this.pending.slice(this.pending.length - keep);
      return pieces;
    }
  }

  /** The end of the content: whatever was held back. */
  end(): ContentPiece[] {
    const rest = this.pending;
    this.pending = "";
    if (rest === "" || this.state === "after") return [];
    // An unclosed think block is reasoning to the end; a lone `<thi` at the start is text.
    return [{ kind: this.state === "thinking" ? "reasoning" : "text", text: rest }];
  }
}

/** The length of the longest end of `text` that is a start of `tag` (shorter than the tag). */
function partialSuffix(text: string, tag: string): number {
  for (let length = Math.min(tag.length - 1, text.length); length > 0; length -= 1) {
    if (tag.startsWith(text.slice(text.length - length))) return length;
  }
  return 0;
}
