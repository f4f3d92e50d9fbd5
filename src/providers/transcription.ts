/**
 * Speech to text through an OpenAI-compatible `POST /audio/transcriptions` (OpenAI, Groq, a local
 * whisper server), with the `openai` SDK: the model is `transcription.model`, the endpoint and key
 * those of its provider unless the section names its own. Configuration problems are ConfigErrors
 * naming the field or variable to set; a failed call is a ProviderError.
 */
import { createReadStream } from "node:fs";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import OpenAI, { toFile } from "openai";
import type { Config } from "../config/schema.js";
import { ConfigError } from "../errors.js";
import { startIdleTimer } from "./idle-timer.js";
import { providerVariables } from "../config/provider-catalog.js";
import { resolveProvider } from "./known-providers.js";
import { type SdkErrorClasses, toProviderError } from "./sdk-errors.js";

/** A downloaded voice note or audio file. */
export interface AudioFile {
  path: string;
  mimeType?: string;
  name?: string;
}

export interface Transcriber {
  /** `provider/model`, as configured. */
  readonly model: string;
  /** The words spoken in `audio`, trimmed. Throws ProviderError. */
  transcribe(audio: AudioFile, signal?: AbortSignal): Promise<string>;
}

export interface TranscriberOptions {
  /** `provider/model`: the part after the first `/` is sent as the model. */
  model: string;
  baseURL: string;
  /** None: no Authorization header (a local server). */
  apiKey?: string;
  language?: string;
  timeoutMs: number;
  fetch?: typeof fetch;
}

const openAIErrors: SdkErrorClasses = OpenAI;

/**
 * The extensions the transcription APIs read the format from (they go by the file name). Telegram
 * names its voice notes `.oga` and Feishu sends Opus, both Ogg inside, which the APIs take as `.ogg`.
 */
const extensionOfType: Record<string, string> = {
  "audio/ogg": ".ogg",
  "audio/opus": ".ogg",
  "audio/oga": ".ogg",
  "audio/mpeg": ".mp3",
  "audio/mp3": ".mp3",
  "audio/mp4": ".m4a",
  "audio/m4a": ".m4a",
  "audio/x-m4a": ".m4a",
  "audio/aac": ".m4a",
  "audio/wav": ".wav",
  "audio/x-wav": ".wav",
  "audio/wave": ".wav",
  "audio/webm": ".webm",
  "audio/flac": ".flac",
  "audio/x-flac": ".flac",
};
const acceptedExtensions = new Set([".flac", ".mp3", ".mp4", ".mpeg", ".mpga", ".m4a", ".ogg", ".wav", ".webm"]);

/** The name the API sees: the file's own when its extension is one the API reads, else one from the type. */
export function uploadNameOf(audio: AudioFile): string {
  const base = path.basename(audio.name ?? audio.path);
  const extension = path.extname(base).toLowerCase();
  if (acceptedExtensions.has(extension)) return base;
  const stem = extension ? base.slice(0, -extension.length) : base;
  const fromExtension = extension === ".oga" || extension === ".opus" || extension === ".ogx" ? ".ogg" : undefined;
  const type = audio.mimeType?.split(";")[0]?.trim().toLowerCase() ?? "";
  return `${stem || "voice"}${fromExtension ?? extensionOfType[type] ?? ".ogg"}`;
}

export function createTranscriber(options: TranscriberOptions): Transcriber {
  const slash = options.model.indexOf("/");
  const modelId = options.model.slice(slash + 1);
  const client = new OpenAI({
    // The SDK refuses to start without a key; a placeholder is fine because the header is removed below.
    apiKey: options.apiKey ?? "unused",
    baseURL: options.baseURL,
    organization: null,
    project: null,
    timeout: options.timeoutMs,
    maxRetries: 1,
    defaultHeaders: options.apiKey ? {} : { Authorization: null },
    // The platform's fetch: a voice note now and then needs no warm pool of its own.
    fetch: options.fetch ?? globalThis.fetch,
  });
  return {
    model: options.model,
    async transcribe(audio, signal) {
      // The whole call is bounded: an upload and its answer, not a stream whose silences count.
      const timer = startIdleTimer(options.timeoutMs, signal, options.timeoutMs);
      try {
        const file = await toFile(createReadStream(audio.path), uploadNameOf(audio), audio.mimeType ? { type: audio.mimeType } : undefined);
        const result = await client.audio.transcriptions.create(
          { file, model: modelId, response_format: "json", ...(options.language ? { language: options.language } : {}) },
          { signal: timer.signal },
        );
        return result.text.trim();
      } catch (error) {
        throw toProviderError(error, openAIErrors, { model: options.model, phase: "request", signal, timer, now: Date.now });
      } finally {
        timer.dispose();
      }
    },
  };
}

export interface ResolveTranscriberOptions {
  /** Where `<PROVIDER>_API_KEY` is read. */
  env: NodeJS.ProcessEnv;
  fetch?: typeof fetch;
}

/** The transcriber `transcription` describes, or undefined when no model is set. Throws ConfigError. */
export function resolveTranscriber(config: Pick<Config, "transcription" | "providers">, options: ResolveTranscriberOptions): Transcriber | undefined {
  const section = config.transcription;
  if (!section.model) return undefined;
  const provider = section.model.slice(0, section.model.indexOf("/"));
  const resolved = resolveProvider(config, provider);
  if (resolved?.type === "anthropic") {
    throw new ConfigError(`transcription.model "${section.model}": provider "${provider}" has no /audio/transcriptions endpoint. Use an OpenAI-compatible one, e.g. openai/whisper-1 or groq/whisper-large-v3.`, "transcription.model");
  }
  const baseURL = section.baseURL ?? resolved?.baseURL;
  if (!baseURL) {
    throw new ConfigError(
      `transcription.model "${section.model}": provider "${provider}" has no known URL. Set transcription.baseURL (or providers.${provider}.baseURL), e.g. http://127.0.0.1:8000/v1 for a local whisper server.`,
      "transcription.baseURL",
    );
  }
  const variable = (resolved?.entry && providerVariables(resolved.entry).apiKey[0]) ?? `${provider.toUpperCase().replace(/[^A-Z0-9]/g, "_")}_API_KEY`;
  const apiKey = section.apiKey || resolved?.settings.apiKey || options.env[variable] || undefined;
  if (!apiKey && !resolved?.keyless && !section.baseURL && !isLoopback(baseURL)) {
    throw new ConfigError(`No API key for transcription.model "${section.model}". Set ${variable} or transcription.apiKey in the config.`, "transcription.apiKey");
  }
  return createTranscriber({
    model: section.model,
    baseURL,
    ...(apiKey ? { apiKey } : {}),
    ...(section.language ? { language: section.language } : {}),
    timeoutMs: section.timeoutMs,
    ...(options.fetch ? { fetch: options.fetch } : {}),
  });
}

/** A tenth of a second of silence as 16 kHz mono PCM WAV: the least a transcription API takes. */
export function silentWav(): Buffer {
  const samples = 1_600;
  const header = Buffer.alloc(44);
  header.write("RIFF", 0);
  header.writeUInt32LE(36 + samples * 2, 4);
  header.write("WAVEfmt ", 8);
  header.writeUInt32LE(16, 16);
  header.writeUInt16LE(1, 20); // PCM
  header.writeUInt16LE(1, 22); // mono
  header.writeUInt32LE(16_000, 24);
  header.writeUInt32LE(32_000, 28);
  header.writeUInt16LE(2, 32);
  header.writeUInt16LE(16, 34);
  header.write("data", 36);
  header.writeUInt32LE(samples * 2, 40);
  return Buffer.concat([header, Buffer.alloc(samples * 2)]);
}

/** `countbot doctor`: the endpoint takes the key and transcribes a tenth of a second of silence. Throws ProviderError. */
export async function probeTranscriber(transcriber: Transcriber): Promise<string> {
  const directory = await mkdtemp(path.join(tmpdir(), "countbot-doctor-"));
  try {
    const file = path.join(directory, "silence.wav");
    await writeFile(file, silentWav());
    const started = Date.now();
    await transcriber.transcribe({ path: file, mimeType: "audio/wav" });
    return `transcribes (${Date.now() - started} ms)`;
  } finally {
    await rm(directory, { recursive: true, force: true });
  }
}

function isLoopback(baseURL: string): boolean {
  const host = new URL(baseURL).hostname.replace(/^\[|\]$/g, "");
  return host === "localhost" || host.endsWith(".localhost") || host === "::1" || /^127\.\d+\.\d+\.\d+$/.test(host);
}
