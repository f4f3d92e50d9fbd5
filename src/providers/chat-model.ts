/**
 * The LlmProvider contract: one method that streams a normalized sequence of parts.
 * Implementations translate SDK events into these parts and SDK errors into ProviderError.
 */

/** A block of model reasoning. Anthropic thinking blocks carry a signature that must be sent back verbatim. */
export interface ReasoningBlock {
  text: string;
  /** Anthropic thinking signature. */
  signature?: string;
  /** Anthropic `redacted_thinking` data; `text` is empty then. */
  redactedData?: string;
}

export interface TextContentPart {
  type: "text";
  text: string;
}

export interface ImageContentPart {
  type: "image";
  /** e.g. `image/png` */
  mediaType: string;
  /** base64, without a data: prefix */
  data: string;
}

export type UserContent = string | Array<TextContentPart | ImageContentPart>;

/** A tool call as the model produced it. `arguments` is the raw JSON text, unparsed. */
export interface ToolCallRequest {
  id: string;
  name: string;
  arguments: string;
}

export type ChatMessage =
  | {
      role: "system";
      content: string;
      /**
       * How many characters at the start of `content` are the same in every turn (the prompt's
       * stable part): Anthropic gets a prompt-cache breakpoint there. Absent: the whole content.
       */
      stableLength?: number;
    }
  | { role: "user"; content: UserContent }
  | {
      role: "assistant";
      content: string;
      toolCalls?: ToolCallRequest[];
      /** Kept and sent back: DeepSeek/GLM `reasoning_content`, Anthropic thinking blocks. */
      reasoning?: ReasoningBlock[];
    }
  | { role: "tool"; toolCallId: string; name: string; content: string };

/** A function the model may call, with its parameters as JSON Schema. */
export interface ToolDefinition {
  name: string;
  description: string;
  parameters: Record<string, unknown>;
}

export interface Usage {
  inputTokens: number;
  outputTokens: number;
  /** Of the input, tokens read from the provider's prompt cache, when reported. */
  cachedInputTokens?: number;
  /** Of the input, tokens written to the prompt cache (Anthropic's cache creation), when reported. */
  cacheWriteInputTokens?: number;
  reasoningTokens?: number;
}

export type FinishReason = "stop" | "tool-calls" | "length" | "content-filter" | "other";

export type StreamPart =
  | { type: "text-delta"; text: string }
  | { type: "reasoning-delta"; text: string }
  /** A finished reasoning block (with its signature where the provider has one). */
  | { type: "reasoning-block"; block: ReasoningBlock }
  /** A complete tool call; emitted once its arguments have fully arrived. */
  | { type: "tool-call"; call: ToolCallRequest }
  | { type: "finish"; reason: FinishReason; usage: Usage; model: string };

export interface ChatRequest {
  /** The model id as the provider knows it (without the `provider/` prefix). */
  model: string;
  messages: ChatMessage[];
  tools?: ToolDefinition[];
  temperature?: number;
  maxTokens?: number;
  signal?: AbortSignal;
}

/**
 * A model provider. `stream` throws ProviderError (before or during iteration);
 * it never retries by itself once it has yielded a part.
 */
export interface LlmProvider {
  /** The provider's name in config, e.g. `openai`, `deepseek`, `anthropic`. */
  readonly name: string;
  stream(request: ChatRequest): AsyncIterable<StreamPart>;
}

/** A provider bound to one model: what the agent loop calls. */
export interface ChatModel {
  /** `provider/model`, for logs and usage records. */
  readonly id: string;
  stream(request: Omit<ChatRequest, "model">): AsyncIterable<StreamPart>;
}
