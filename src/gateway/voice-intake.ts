/**
 * Voice notes at admission: the gateway that downloaded a voice note transcribes it before the
 * message goes onto the bus, so the agent (on whichever worker) receives text marked as
 * transcribed, the session history keeps the words, and a re-run turn does not pay for the
 * transcription again. Workers need not reach the file: only the text travels.
 *
 * In order, for each audio attachment (`kind: "audio"`, as the adapter marked it):
 * 1. no transcription configured: refused, "voice is not set up";
 * 2. longer than `maxSeconds` (when the platform said how long): refused, naming both lengths;
 * 3. larger than `maxBytes`: refused, naming both sizes;
 * 4. the transcription fails (the service errs, times out): refused, saying so;
 * 5. otherwise its text joins the message as `[voice message, transcribed] <words>`.
 * A refusal is one plain line to the sender; whatever else the message carried (a caption, an
 * image) still goes to the agent. Other media pass through untouched.
 */
import { stat } from "node:fs/promises";
import type { Logger } from "pino";
import type { Media } from "../bus/message.js";
import { errorMessage } from "../errors.js";
import type { Transcriber } from "../providers/transcription.js";
import { formatBytes } from "./kit/download.js";

export const VOICE_NOT_SET_UP = "Voice messages are not set up on this bot, so I can't listen to this one. Please type your message instead.";
export const TRANSCRIPT_MARK = "[voice message, transcribed]";

export interface VoiceIntakeOptions {
  /** Absent: voice is not set up. */
  transcriber?: Transcriber;
  maxBytes: number;
  maxSeconds: number;
}

export interface VoiceResult {
  /** The lines to add to the message's text: one per transcribed note. */
  transcripts: string[];
  /** The message's media without its audio. */
  media: Media[];
  /** The line for the sender, when a voice note was not transcribed. */
  refusal?: string;
}

export interface VoiceIntake {
  /** Whether voice notes are transcribed here. */
  readonly enabled: boolean;
  /** Transcribes the audio in `media`; never throws (a failure is a refusal). */
  take(media: Media[], log: Logger, signal?: AbortSignal): Promise<VoiceResult>;
}

export const isVoice = (item: Media) => item.kind === "audio";

/** `45 s`, `2 min`, `7 min 30 s`. */
export function formatDuration(seconds: number): string {
  const whole = Math.round(seconds);
  if (whole < 60) return `${whole} s`;
  const minutes = Math.floor(whole / 60);
  const rest = whole % 60;
  return rest === 0 ? `${minutes} min` : `${minutes} min ${rest} s`;
}

export function createVoiceIntake(options: VoiceIntakeOptions): VoiceIntake {
  const { transcriber, maxBytes, maxSeconds } = options;

  async function refusalOf(item: Media): Promise<string | undefined> {
    if (item.durationSeconds !== undefined && item.durationSeconds > maxSeconds) {
      return `Your voice message is ${formatDuration(item.durationSeconds)} long; I can transcribe up to ${formatDuration(maxSeconds)}. Please send a shorter one or type it.`;
    }
    const { size } = await stat(item.path);
    if (size > maxBytes) return `Your voice message is ${formatBytes(size)}; I can transcribe up to ${formatBytes(maxBytes)}. Please send a shorter one or type it.`;
    return undefined;
  }

  async function transcribe(item: Media, engine: Transcriber, log: Logger, signal?: AbortSignal): Promise<{ text: string } | { refusal: string }> {
    try {
      const refusal = await refusalOf(item);
      if (refusal) {
        log.info({ durationSeconds: item.durationSeconds, maxSeconds, maxBytes }, "voice message over the transcription caps");
        return { refusal };
      }
      const started = Date.now();
      const text = await engine.transcribe(item, signal);
      log.info({ model: engine.model, durationSeconds: item.durationSeconds, characters: text.length, tookMs: Date.now() - started }, "voice message transcribed");
      return { text: text === "" ? `${TRANSCRIPT_MARK} (no speech recognized)` : `${TRANSCRIPT_MARK} ${text}` };
    } catch (error) {
      log.warn({ model: engine.model, error: errorMessage(error) }, "voice message transcription failed");
      return { refusal: "I couldn't transcribe your voice message: the speech-to-text service failed. Please try again, or type it." };
    }
  }

  return {
    enabled: transcriber !== undefined,
    async take(media, log, signal) {
      const voices = media.filter(isVoice);
      const rest = media.filter((item) => !isVoice(item));
      if (voices.length === 0) return { transcripts: [], media };
      if (!transcriber) return { transcripts: [], media: rest, refusal: VOICE_NOT_SET_UP };
      const transcripts: string[] = [];
      let refusal: string | undefined;
      for (const item of voices) {
        const outcome = await transcribe(item, transcriber, log, signal);
        if ("text" in outcome) transcripts.push(outcome.text);
        else refusal ??= outcome.refusal;
      }
      return { transcripts, media: rest, ...(refusal ? { refusal } : {}) };
    },
  };
}
