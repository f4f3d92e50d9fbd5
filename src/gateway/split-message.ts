/**
 * Cutting a long reply into messages a platform accepts.
 *
 * Preference, highest first: the end of the text, a paragraph break (blank line), a line break,
 * the end of a sentence, a space between words, a line break inside a code block, a space inside a
 * code line, and only when one word (or code line) alone is longer than the limit, a cut between
 * two characters (grapheme clusters, so no emoji or surrogate pair is cut in half). Among the
 * breaks of the best kind that fit, the furthest wins.
 *
 * Fenced code blocks (``` or ~~~, any indentation) stay balanced in every chunk: a chunk that ends
 * inside a block gets a closing fence, and the next chunk reopens the block with the same opening
 * line (language tag included, indentation dropped). A fence left open at the end of the text is
 * closed. The whitespace at a break (spaces, line breaks, blank lines) is dropped; the indentation
 * of the line that starts the next chunk is kept. `\r\n` becomes `\n`.
 *
 * Every chunk satisfies `measure(chunk) <= maxLength`, fences included. The default measure is
 * the UTF-16 length of the chunk as written; pass the length the platform counts after rendering.
 */

export interface SplitOptions {
  /**
   * How long the platform will find `chunk` (e.g. after Markdown rendering). Should grow with the
   * chunk; default `chunk.length`.
   */
  measure?: (chunk: string) => number;
}

/** A place the text may be cut: the chunk ends at `end`, the next starts at `next`. */
interface Break {
  end: number;
  next: number;
  priority: number;
}

const Priority = {
  end: 100,
  paragraph: 60,
  line: 50,
  sentence: 40,
  word: 30,
  codeLine: 20,
  codeSpace: 10,
} as const;

/** A fenced code block as found in the text. */
interface FencedBlock {
  /** Start of the opening line. */
  openStart: number;
  /** Start of the first content line (just after the opening line's newline). */
  contentStart: number;
  /** Start of the closing line, or the end of the text when the block is never closed. */
  closeStart: number;
  /** End of the closing line (its newline excluded), or the end of the text. */
  end: number;
  /** The opening line without its indentation, e.g. "```ts". */
  opener: string;
  indent: string;
  /** The fence that closes this block, e.g. "```" or "~~~~". */
  fence: string;
}

type LineKind = "prose" | "blank" | "opener" | "closer" | "code";

interface Line {
  start: number;
  end: number;
  kind: LineKind;
}

const OPENER = /^([ \t]*)((`{3,})[^`]*|(~{3,}).*)$/;
const CLOSER = /^[ \t]*(`{3,}|~{3,})[ \t]*$/;

/** Splits `text` into chunks of at most `maxLength` (as `options.measure` counts), in order. */
export function splitMessage(text: string, maxLength: number, options: SplitOptions = {}): string[] {
  if (!(maxLength >= 1)) throw new RangeError(`maxLength must be at least 1, got ${maxLength}`);
  const measure = options.measure ?? ((chunk: string) => chunk.length);
  const source = normalize(text);
  if (source.length === 0) return [];
  const { lines, blocks } = scanLines(source);
  const splitter = new Splitter(source, blocks, () => findBreaks(source, lines), maxLength, measure);
  return splitter.run();
}

/** `\r\n` → `\n`, leading blank lines and trailing whitespace removed. */
function normalize(text: string): string {
  return text.replace(/\r\n?/g, "\n").replace(/^(?:[ \t]*\n)+/, "").trimEnd();
}

/** Classifies each line and finds the fenced code blocks. */
export function scanLines(text: string): { lines: Line[]; blocks: FencedBlock[] } {
  const lines: Line[] = [];
  const blocks: FencedBlock[] = [];
  let open: { block: FencedBlock; char: string; size: number } | undefined;
  let start = 0;
  while (start <= text.length) {
    const newline = text.indexOf("\n", start);
    const end = newline === -1 ? text.length : newline;
    const content = text.slice(start, end);
    let kind: LineKind;
    if (open) {
      const closer = CLOSER.exec(content);
      if (closer && closer[1]![0] === open.char && closer[1]!.length >= open.size) {
        kind = "closer";
        open.block.closeStart = start;
        open.block.end = end;
        open = undefined;
      } else {
        kind = "code";
      }
    } else {
      const opener = OPENER.exec(content);
      if (opener) {
        kind = "opener";
        const fence = opener[3] ?? opener[4]!;
        const block: FencedBlock = {
          openStart: start,
          contentStart: Math.min(end + 1, text.length),
          closeStart: text.length,
          end: text.length,
          opener: opener[2]!.trimEnd(),
          indent: opener[1]!,
          fence,
        };
        blocks.push(block);
        open = { block, char: fence[0]!, size: fence.length };
      } else {
        kind = content.trim() === "" ? "blank" : "prose";
      }
    }
    lines.push({ start, end, kind });
    if (newline === -1) break;
    start = newline + 1;
  }
  return { lines, blocks };
}

/** Every place the text may be cut, by position. */
function findBreaks(text: string, lines: Line[]): Break[] {
  const byEnd = new Map<string, Break>();
  const add = (end: number, next: number, priority: number) => {
    const key = `${end}:${next}`;
    const known = byEnd.get(key);
    if (!known || known.priority < priority) byEnd.set(key, { end, next, priority });
  };
  for (let index = 0; index < lines.length; index++) {
    const line = lines[index]!;
    if (line.kind === "prose") addInlineBreaks(text, line, add);
    if (line.kind === "code") addCodeSpaceBreaks(text, line, add);
    const following = lines[index + 1];
    if (!following) continue;
    if (line.kind === "code" && following.kind === "code") {
      add(line.end, following.start, Priority.codeLine);
      continue;
    }
    // Never part an opening fence from its content, nor content from its closing fence.
    if (line.kind === "opener" || line.kind === "code" || following.kind === "closer" || following.kind === "code") continue;
    let next = following.start;
    let blank = line.kind === "blank" || following.kind === "blank";
    for (let skip = index + 1; skip < lines.length && lines[skip]!.kind === "blank"; skip++) {
      next = lines[skip + 1]?.start ?? lines[skip]!.end;
      blank = true;
    }
    let end = line.end;
    while (end > 0 && /\s/.test(text[end - 1]!)) end--;
    if (end === 0 || next >= text.length) continue;
    add(end, next, blank ? Priority.paragraph : Priority.line);
  }
  const breaks = [...byEnd.values()].sort((a, b) => a.end - b.end || a.next - b.next);
  breaks.push({ end: text.length, next: text.length, priority: Priority.end });
  return breaks;
}

const SENTENCE_END = /[.!?…]["'”’)\]]*[ \t]+(?=\S)|[。！？]/g;
const WORD_GAP = /[ \t]+(?=\S)/g;

function addInlineBreaks(text: string, line: Line, add: (end: number, next: number, priority: number) => void): void {
  const content = text.slice(line.start, line.end);
  for (const match of content.matchAll(SENTENCE_END)) {
    const gap = /[ \t]+$/.exec(match[0]);
    const end = line.start + match.index + match[0].length - (gap ? gap[0].length : 0);
    if (end > line.start) add(end, line.start + match.index + match[0].length, Priority.sentence);
  }
  for (const match of content.matchAll(WORD_GAP)) {
    if (match.index === 0) continue; // leading indentation is not a word gap
    add(line.start + match.index, line.start + match.index + match[0].length, Priority.word);
  }
}

/** Inside code the spaces are kept (at the end of the first part): they may matter. */
function addCodeSpaceBreaks(text: string, line: Line, add: (end: number, next: number, priority: number) => void): void {
  const content = text.slice(line.start, line.end);
  for (const match of content.matchAll(WORD_GAP)) {
    const at = line.start + match.index + match[0].length;
    if (match.index > 0) add(at, at, Priority.codeSpace);
  }
}

/** Made once, the first time a word must be cut (building a segmenter costs far more than most splits). */
let graphemes: Intl.Segmenter | undefined;

class Splitter {
  private found: Break[] | undefined;

  constructor(
    private readonly text: string,
    private readonly blocks: FencedBlock[],
    private readonly findBreaks: () => Break[],
    private readonly maxLength: number,
    private readonly measure: (chunk: string) => number,
  ) {}

  /** Found only when the text must be cut: most replies fit in one message. */
  private get breaks(): Break[] {
    return (this.found ??= this.findBreaks());
  }

  run(): string[] {
    if (this.fits(0, this.text.length)) return [this.chunk(0, this.text.length)];
    const chunks: string[] = [];
    let start = 0;
    let first = 0; // index of the first break that can end a chunk starting at `start`
    while (start < this.text.length) {
      while (first < this.breaks.length && this.breaks[first]!.end <= start) first++;
      const chosen = this.bestBreak(start, first) ?? this.hardCut(start, first);
      chunks.push(this.chunk(start, chosen.end));
      start = chosen.next;
      while (start < this.text.length && this.text[start] === "\n") start++;
    }
    return chunks;
  }

  private fits(start: number, end: number): boolean {
    return this.measure(this.chunk(start, end)) <= this.maxLength;
  }

  /** The best-ranked break that fits, furthest first among equals; undefined when none fits. */
  private bestBreak(start: number, first: number): Break | undefined {
    const count = this.breaks.length - first;
    const hint = this.lastBreakWithin(start + this.maxLength) - first;
    const furthest = furthestFitting(count, (index) => this.fits(start, this.breaks[first + index]!.end), hint);
    if (furthest < 0) return undefined;
    const candidates = this.breaks.slice(first, first + furthest + 1).sort((a, b) => b.priority - a.priority || b.end - a.end);
    return candidates.find((candidate) => this.fits(start, candidate.end));
  }

  /** Index of the last break ending at or before `position`. */
  private lastBreakWithin(position: number): number {
    let low = 0;
    let high = this.breaks.length - 1;
    while (low <= high) {
      const middle = (low + high) >> 1;
      if (this.breaks[middle]!.end <= position) low = middle + 1;
      else high = middle - 1;
    }
    return high;
  }

  /** Cuts between two graphemes, as far as fits: one word (or code line) is over the limit. */
  private hardCut(start: number, first: number): Break {
    const limit = this.breaks[first]?.end ?? this.text.length;
    const furthest = furthestFitting(limit - start, (index) => this.fits(start, start + index + 1), this.maxLength - 1);
    if (furthest < 0) {
      throw new RangeError(`maxLength ${this.maxLength} is too small to hold ${JSON.stringify(this.chunk(start, start + 1))}`);
    }
    const cut = this.graphemeBoundary(start, start + furthest + 1);
    return { end: cut, next: cut, priority: 0 };
  }

  /** The last grapheme boundary in (start, at]; at least one code point when a grapheme is wider. */
  private graphemeBoundary(start: number, at: number): number {
    if (at >= this.text.length) return at;
    const from = Math.max(start, at - 64);
    let boundary = start;
    // Index 0 is where the window starts, not necessarily a boundary: only later ones count.
    graphemes ??= new Intl.Segmenter(undefined, { granularity: "grapheme" });
    for (const { index } of graphemes.segment(this.text.slice(from, at + 1))) {
      if (index > 0 && from + index <= at) boundary = from + index;
    }
    if (boundary > start) return boundary;
    const code = this.text.charCodeAt(at - 1);
    return code >= 0xd800 && code <= 0xdbff && at - 1 > start ? at - 1 : at;
  }

  /** The text from `start` to `end`, with the fences needed to keep code blocks balanced. */
  private chunk(start: number, end: number): string {
    let prefix = "";
    let suffix = "";
    for (const block of this.blocks) {
      if (block.openStart >= end) break;
      const reopened = start >= block.contentStart && start < block.closeStart;
      if (reopened) prefix = `${block.opener}\n`;
      // Ends inside: past the opening line but before the closing one is complete.
      if (end > block.openStart && end <= block.closeStart) {
        suffix = `\n${reopened ? "" : block.indent}${block.fence}`;
      }
    }
    let body = this.text.slice(start, end);
    if (suffix) body = body.replace(/\n+$/, "");
    return prefix + body + suffix;
  }
}

/**
 * The largest index in [0, count) whose `fits(index)` holds, or -1, assuming fitting is (nearly)
 * monotone. Probes `hint` first (where the raw length says the limit is), then gallops and
 * bisects, so a measure that renders the chunk runs a few times per chunk, not once per break.
 */
function furthestFitting(count: number, fits: (index: number) => boolean, hint = 0): number {
  if (count === 0) return -1;
  let good = -1;
  let bad = count;
  const probe = (index: number) => {
    if (fits(index)) good = index;
    else bad = index;
  };
  probe(Math.min(Math.max(hint, 0), count - 1));
  if (good < 0 && bad > 0) probe(0);
  if (good < 0) return -1;
  for (let step = 1; good + step < bad; step *= 2) {
    const before = good;
    probe(good + step);
    if (good === before) break;
  }
  while (bad - good > 1) probe((good + bad) >> 1);
  return good;
}
