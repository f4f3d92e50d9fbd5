/**
 * Replies as Feishu messages: an interactive card (JSON 2.0) holding one Markdown element, or, when
 * a card is refused, a post (rich text with one `md` element) and last a plain text message.
 *
 * Feishu refuses a card over 30 KB of JSON, with more than 5 tables or more than 200 elements.
 * {@link fitCards} checks those limits before anything is sent and splits a text that would break
 * one into several texts that each fit a card (at paragraph and code-block boundaries, through the
 * gateway's splitter), so a long reply arrives whole as several cards instead of being refused.
 */
import { splitMessage } from "../../src/gateway/kit/index.js";

export interface CardLimits {
  /** Bytes of the card's JSON. Feishu allows 30 KB; a margin is kept for what Feishu adds. */
  maxBytes: number;
  maxTables: number;
  maxElements: number;
}

export const cardLimits: CardLimits = { maxBytes: 28 * 1024, maxTables: 5, maxElements: 200 };

export type MessageBody = { msgType: "interactive" | "post" | "text"; content: string };

/** The first words of a text, without Markdown marks: what the chat list shows for the card. */
function summaryOf(text: string): string {
  const plain = text.replace(/```[\s\S]*?```/g, " ").replace(/[#*_`>|~[\]()-]+/g, " ").replace(/\s+/g, " ").trim();
  return plain.length > 60 ? `${plain.slice(0, 59)}…` : plain;
}

export function markdownCard(text: string): MessageBody {
  const card = {
    schema: "2.0",
    config: { update_multi: true, summary: { content: summaryOf(text) } },
    body: { elements: [{ tag: "markdown", content: text }] },
  };
  return { msgType: "interactive", content: JSON.stringify(card) };
}

export function markdownPost(text: string): MessageBody {
  return { msgType: "post", content: JSON.stringify({ zh_cn: { title: "", content: [[{ tag: "md", text }]] } }) };
}

export function plainText(text: string): MessageBody {
  return { msgType: "text", content: JSON.stringify({ text }) };
}

/** Markdown tables outside code fences: each has one delimiter row (`| --- | :-: |`). */
export function countTables(text: string): number {
  let tables = 0;
  let fenced = false;
  for (const line of text.split("\n")) {
    if (/^\s*(```|~~~)/.test(line)) fenced = !fenced;
    else if (!fenced && /^\s*\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)*\|?\s*$/.test(line) && line.includes("|")) tables += 1;
  }
  return tables;
}

/** What about this text breaks a card's limits, if anything. */
export function cardProblem(text: string, limits: CardLimits = cardLimits): "size" | "tables" | "elements" | undefined {
  const card = JSON.parse(markdownCard(text).content) as { body: { elements: unknown[] } };
  if (card.body.elements.length > limits.maxElements) return "elements";
  if (Buffer.byteLength(markdownCard(text).content) > limits.maxBytes) return "size";
  if (countTables(text) > limits.maxTables) return "tables";
  return undefined;
}

/** The text as one or more texts that each fit one card. */
export function fitCards(text: string, limits: CardLimits = cardLimits): string[] {
  if (cardProblem(text, limits) === undefined) return [text];
  const over = limits.maxBytes + 1;
  // The splitter asks for pieces whose measure is at most maxBytes: a piece with too many tables measures as too big.
  const measure = (piece: string) => (countTables(piece) > limits.maxTables ? over : Buffer.byteLength(markdownCard(piece).content));
  return splitMessage(text, limits.maxBytes, { measure });
}
