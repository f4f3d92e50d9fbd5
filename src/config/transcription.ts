/**
 * The `transcription` section: voice notes turned into text through an OpenAI-compatible
 * `/audio/transcriptions` endpoint before the agent sees them. Unset `model`: voice is not set up,
 * and a voice note is answered with one line saying so.
 */
import { z } from "zod";

export const DEFAULT_TRANSCRIPTION_MAX_BYTES = 20 * 1024 * 1024;
export const DEFAULT_TRANSCRIPTION_MAX_SECONDS = 300;

export const TranscriptionSchema = z
  .strictObject({
    model: z
      .string()
      .regex(/^[\w.-]+\/.+$/, "expected provider/model, e.g. openai/whisper-1 or groq/whisper-large-v3")
      .optional()
      .describe("`provider/model` of the speech-to-text model, e.g. `openai/whisper-1`, `groq/whisper-large-v3`. Unset: voice messages are not transcribed (the sender is told)."),
    baseURL: z
      .url()
      .optional()
      .describe("Base URL of the OpenAI-compatible API serving `/audio/transcriptions` (a local whisper server, say). Default: the provider's (`providers.<name>.baseURL` or its built-in URL)."),
    apiKey: z
      .string()
      .optional()
      .describe("API key (secret) for the transcription endpoint. Default: the provider's key (`providers.<name>.apiKey`, else the `<PROVIDER>_API_KEY` variable)."),
    language: z
      .string()
      .regex(/^[a-z]{2,3}$/, "expected an ISO-639-1 code such as en or zh")
      .optional()
      .describe("The language spoken, as an ISO-639-1 code (`en`, `zh`); unset: the model detects it."),
    maxBytes: z
      .number()
      .int()
      .positive()
      .max(100 * 1024 * 1024)
      .default(DEFAULT_TRANSCRIPTION_MAX_BYTES)
      .describe("Largest voice file sent for transcription, in bytes (default 20 MB; OpenAI takes at most 25 MB). A larger one is refused with a line to the sender."),
    maxSeconds: z
      .number()
      .positive()
      .max(4 * 60 * 60)
      .default(DEFAULT_TRANSCRIPTION_MAX_SECONDS)
      .describe("Longest voice message transcribed, in seconds (default 300), when the platform tells its duration. A longer one is refused with a line to the sender."),
    timeoutMs: z
      .number()
      .int()
      .min(1_000)
      .max(600_000)
      .default(60_000)
      .describe("How long one transcription may take before the sender is told it failed."),
  })
  .prefault({});

export type TranscriptionConfig = z.infer<typeof TranscriptionSchema>;
