/**
 * A ChatModel over an ordered list of provider/model targets: retries a target on transient
 * errors, then falls back to the next one, and never does either once output has been streamed
 * (the caller has already shown it; a second answer would be spliced onto the first).
 */
import { ConfigError, ProviderError, errorMessage } from "../errors.js";
import { sleep as defaultSleep } from "../sleep.js";
import type { ChatModel, ChatRequest, LlmProvider, StreamPart } from "./chat-model.js";

export interface ChatModelTarget {
  provider: LlmProvider;
  /** The model id as the provider knows it. */
  model: string;
}

/** The slice of a pino logger this module uses. */
export interface ProviderLogger {
  warn(fields: Record<string, unknown>, message: string): void;
}

export interface ChatModelOptions {
  /** Tried in order; the first one is the model, the rest are fallbacks. */
  targets: ChatModelTarget[];
  /** Retries of one target on a retryable error (so `retries + 1` attempts). Default 3. */
  retries?: number;
  /** First backoff delay; doubled on each retry. Default 1000. */
  baseDelayMs?: number;
  /** Cap on any wait, the server's Retry-After included. Default 30 000. */
  maxDelayMs?: number;
  /** Waits between attempts; must reject when the signal fires. Default: a timer. */
  sleep?: (milliseconds: number, signal?: AbortSignal) => Promise<void>;
  /** Jitter source in [0, 1). Default Math.random. */
  random?: () => number;
  logger?: ProviderLogger;
}

/** Splits `provider/model`; the model part may itself contain slashes (`openrouter/anthropic/claude-sonnet-4`). */
export function parseModelRef(reference: string): { provider: string; model: string } {
  const slash = reference.indexOf("/");
  if (slash <= 0 || slash === reference.length - 1) {
    throw new ConfigError(`Model "${reference}" is not of the form provider/model, e.g. openai/gpt-4o-mini.`, "agent.model");
  }
  return { provider: reference.slice(0, slash), model: reference.slice(slash + 1) };
}

export function createChatModel(options: ChatModelOptions): ChatModel {
  const [first] = options.targets;
  if (!first) throw new ConfigError("A chat model needs at least one provider/model target.", "agent.model");
  const retries = options.retries ?? 3;
  const baseDelayMs = options.baseDelayMs ?? 1000;
  const maxDelayMs = options.maxDelayMs ?? 30_000;
  const sleep = options.sleep ?? defaultSleep;
  const random = options.random ?? Math.random;
  const targetId = (target: ChatModelTarget) => `${target.provider.name}/${target.model}`;

  // Exponential with jitter so many workers hitting one limit do not retry in lockstep; the
  // server's own Retry-After is obeyed as given, since it knows when the limit resets.
  function delayFor(retry: number, error: ProviderError): number {
    if (error.retryAfterMs !== undefined) return Math.min(error.retryAfterMs, maxDelayMs);
    const ceiling = Math.min(baseDelayMs * 2 ** retry, maxDelayMs);
    return Math.round(ceiling / 2 + (random() * ceiling) / 2);
  }

  async function* stream(request: Omit<ChatRequest, "model">): AsyncGenerator<StreamPart> {
    const failures: ProviderError[] = [];
    for (const [position, target] of options.targets.entries()) {
      const id = targetId(target);
      for (let attempt = 0; ; attempt++) {
        throwIfAborted(request.signal, id);
        let yielded = false;
        try {
          for await (const part of target.provider.stream({ ...request, model: target.model })) {
            yielded = true;
            yield part;
          }
          return;
        } catch (caught) {
          const error = asProviderError(caught, id);
          if (yielded || request.signal?.aborted) throw error;
          if (error.kind === "aborted" || error.kind === "bad-request" || error.kind === "unknown") throw error;
          if (error.retryable && attempt < retries) {
            const delayMs = delayFor(attempt, error);
            options.logger?.warn({ model: id, kind: error.kind, status: error.status, attempt: attempt + 1, delayMs }, "model call failed; retrying");
            await backOff(sleep, delayMs, request.signal, id);
            continue;
          }
          // Out of retries, or an error (quota, auth) that only another provider can get around.
          failures.push(error);
          const next = options.targets[position + 1];
          if (next) {
            options.logger?.warn({ model: id, kind: error.kind, status: error.status, fallback: targetId(next) }, "model failed; falling back");
          }
          break;
        }
      }
    }
    throw finalError(failures);
  }

  return { id: targetId(first), stream };
}

function asProviderError(error: unknown, model: string): ProviderError {
  if (error instanceof ProviderError) return error;
  return new ProviderError(`${model}: ${errorMessage(error)}`, { kind: "unknown", model, cause: error });
}

function throwIfAborted(signal: AbortSignal | undefined, model: string): void {
  if (signal?.aborted) throw new ProviderError(`${model}: request aborted`, { kind: "aborted", model });
}

function finalError(failures: ProviderError[]): ProviderError {
  const last = failures[failures.length - 1];
  if (!last) throw new Error("unreachable: no target was tried");
  if (failures.length === 1) return last;
  const summary = failures.map((failure) => failure.message).join("; ");
  return new ProviderError(`All ${failures.length} models failed: ${summary}`, {
    kind: last.kind,
    status: last.status,
    retryAfterMs: last.retryAfterMs,
    model: last.model,
    cause: last,
  });
}

/**
 * Races the (possibly injected) sleep against the signal, so a cancelled turn never waits out a
 * backoff, and turns the abort into a ProviderError of kind `aborted`.
 */
async function backOff(
  sleep: (milliseconds: number, signal?: AbortSignal) => Promise<void>,
  milliseconds: number,
  signal: AbortSignal | undefined,
  model: string,
): Promise<void> {
  if (!signal) return sleep(milliseconds);
  throwIfAborted(signal, model);
  let onAbort: (() => void) | undefined;
  const aborted = new Promise<never>((_, reject) => {
    onAbort = () => reject(new ProviderError(`${model}: request aborted`, { kind: "aborted", model }));
    signal.addEventListener("abort", onAbort, { once: true });
  });
  try {
    await Promise.race([sleep(milliseconds, signal), aborted]);
  } finally {
    if (onAbort) signal.removeEventListener("abort", onAbort);
  }
}
