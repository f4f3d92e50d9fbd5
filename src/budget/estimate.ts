/**
 * A model call's worst case before it is made: the prompt's tokens as sent, estimated high, plus
 * the most it may write (`maxTokens`). Tokenizers differ by model and none is loaded here, so the
 * estimate errs on the side of more: a token per 3 characters of ASCII text (English runs about 4),
 * one and a half per other character (Chinese, Japanese and Korean run about one), a fixed count
 * per image above what the providers charge for a large one, and a few tokens per message for the
 * chat format. Tool definitions are sent with every call and counted the same way.
 */
import type { ChatMessage, ChatRequest, ToolDefinition } from "../providers/chat-model.js";

/** More than OpenAI (high detail, 2048 px) or Anthropic (about 1,600) charge for one image. */
const TOKENS_PER_IMAGE = 2_000;
const TOKENS_PER_MESSAGE = 8;
/** Used when a call sets no `maxTokens`. */
export const DEFAULT_MAX_OUTPUT_TOKENS = 4_096;

export function estimateTextTokens(text: string): number {
  // All ASCII (one UTF-8 byte per character), the usual case: counted natively, no loop.
  if (Buffer.byteLength(text, "utf8") === text.length) return Math.ceil(text.length / 3);
  let ascii = 0;
  let other = 0;
  for (let index = 0; index < text.length; index++) {
    const code = text.charCodeAt(index);
    // A surrogate pair is one character: count it at its first half only.
    if (code >= 0xdc00 && code <= 0xdfff) continue;
    if (code < 128) ascii += 1;
    else other += 1;
  }
  return Math.ceil(ascii / 3 + other * 1.5);
}

function messageTokens(message: ChatMessage): number {
  let tokens = TOKENS_PER_MESSAGE;
  if (typeof message.content === "string") tokens += estimateTextTokens(message.content);
  else for (const part of message.content) tokens += part.type === "text" ? estimateTextTokens(part.text) : TOKENS_PER_IMAGE;
  if (message.role === "assistant") {
    for (const call of message.toolCalls ?? []) tokens += estimateTextTokens(call.name) + estimateTextTokens(call.arguments) + TOKENS_PER_MESSAGE;
    for (const block of message.reasoning ?? []) tokens += estimateTextTokens(block.text) + estimateTextTokens(block.redactedData ?? "");
  }
  return tokens;
}

/** Each tool definition's tokens, estimated once: the same definitions go with every call. */
const toolTokensKnown = new WeakMap<ToolDefinition, number>();

function toolTokens(tools: readonly ToolDefinition[]): number {
  let sum = 0;
  for (const tool of tools) {
    let tokens = toolTokensKnown.get(tool);
    if (tokens === undefined) {
      tokens = estimateTextTokens(tool.name) + estimateTextTokens(tool.description) + estimateTextTokens(JSON.stringify(tool.parameters));
      toolTokensKnown.set(tool, tokens);
    }
    sum += tokens;
  }
  return sum;
}

/** The prompt's tokens, estimated high. */
export function estimatePromptTokens(request: Pick<ChatRequest, "messages" | "tools">): number {
  return request.messages.reduce((sum, message) => sum + messageTokens(message), 0) + toolTokens(request.tools ?? []);
}
