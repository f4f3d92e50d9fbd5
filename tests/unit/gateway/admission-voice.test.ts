/**
 * Voice notes at admission (rule 6): transcribed before publishing, marked as transcribed; refused
 * in one line when voice is not set up, over a cap, or the transcription fails, with the rest of
 * the message still published. The transcriber is the real one, against the fake server.
 */
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import pino from "pino";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { createMemoryBus } from "../../../src/bus/memory-bus.js";
import type { MessageBus } from "../../../src/bus/message-bus.js";
import type { InboundMessage, Media } from "../../../src/bus/message.js";
import { createAdmission } from "../../../src/gateway/admission.js";
import type { PlatformEvent } from "../../../src/gateway/channel.js";
import { TRANSCRIPT_MARK, VOICE_NOT_SET_UP, createVoiceIntake, formatDuration } from "../../../src/gateway/voice-intake.js";
import { createTranscriber } from "../../../src/providers/transcription.js";
import { type FakeOpenAIServer, startFakeOpenAI } from "../../support/fake-openai-server.js";

let server: FakeOpenAIServer;
let root: string;
let voicePath: string;
let imagePath: string;
let bus: MessageBus;

beforeAll(async () => {
  root = await mkdtemp(path.join(tmpdir(), "countbot-admission-voice-"));
  voicePath = path.join(root, "voice.oga");
  imagePath = path.join(root, "photo.jpg");
  await writeFile(voicePath, Buffer.alloc(2_000, 1));
  await writeFile(imagePath, Buffer.from("jpeg"));
  server = await startFakeOpenAI({
    script: [],
    transcriptions: (upload) => (upload.model === "broken" ? { error: { status: 400, message: "unsupported" } } : { text: "what is the weather in Paris" }),
  });
});
afterAll(async () => {
  await server.close();
  await rm(root, { recursive: true, force: true });
});
beforeEach(() => {
  bus = createMemoryBus();
});
afterEach(async () => {
  await bus.close();
});

const voice = (extra: Partial<Media> = {}): Media => ({ path: voicePath, kind: "audio", mimeType: "audio/ogg", durationSeconds: 4, ...extra });

function event(id: string, media: Media[], text = ""): PlatformEvent {
  return { eventId: id, chatId: "42", chatType: "private", senderId: "42", senderIsBot: false, text, mentionsBot: false, repliesToBot: false, platformMessageId: `p${id}`, media, receivedAt: 0 };
}

function gate(options: { model?: string; maxBytes?: number; maxSeconds?: number } | "not set up") {
  const replies: string[] = [];
  const transcriber = options === "not set up" ? undefined : createTranscriber({ model: `local/${options.model ?? "whisper"}`, baseURL: server.url, timeoutMs: 10_000 });
  const limits = options === "not set up" ? {} : options;
  const admission = createAdmission({
    channel: "telegram",
    bus,
    store: { pairing: { isApproved: async () => true } as never },
    adapter: { typing: async () => undefined },
    reply: async (reply) => void replies.push(reply.text),
    policy: { allowFrom: ["42"], groupPolicy: "mention" },
    logger: pino({ level: "silent" }),
    voice: createVoiceIntake({ ...(transcriber ? { transcriber } : {}), maxBytes: limits.maxBytes ?? 10_000, maxSeconds: limits.maxSeconds ?? 60 }),
  });
  return { admission, replies };
}

async function queued(): Promise<InboundMessage[]> {
  const claims = await bus.claimSessions({ timeoutMs: 10, max: 10 });
  return claims.flatMap((claim) => claim.messages);
}

describe("voice notes at admission", () => {
  it("publishes the transcript, marked, in place of the audio", async () => {
    const { admission, replies } = gate({});
    expect(await admission.handle(event("1", [voice()]))).toBe("published");
    const [message] = await queued();
    expect(message!.content).toBe(`${TRANSCRIPT_MARK} what is the weather in Paris`);
    expect(message!.media).toEqual([]);
    expect(replies).toEqual([]);
  });

  it("keeps the caption and an image beside the transcript", async () => {
    const { admission } = gate({});
    const image: Media = { path: imagePath, kind: "image", mimeType: "image/jpeg" };
    expect(await admission.handle(event("2", [voice(), image], "listen"))).toBe("published");
    const [message] = await queued();
    expect(message!.content).toBe(`listen\n\n${TRANSCRIPT_MARK} what is the weather in Paris`);
    expect(message!.media).toEqual([image]);
  });

  it("without transcription says in one line that voice is not set up, once, and publishes nothing", async () => {
    const { admission, replies } = gate("not set up");
    expect(await admission.handle(event("3", [voice()]))).toBe("voice-refused");
    expect(await admission.handle(event("3", [voice()]))).toBe("duplicate");
    expect(replies).toEqual([VOICE_NOT_SET_UP]);
    expect(VOICE_NOT_SET_UP).not.toContain("\n");
    expect(await queued()).toEqual([]);
  });

  it("without transcription still publishes the caption that came with the voice note", async () => {
    const { admission, replies } = gate("not set up");
    expect(await admission.handle(event("4", [voice()], "also this text"))).toBe("published");
    expect(replies).toEqual([VOICE_NOT_SET_UP]);
    expect((await queued()).map((message) => [message.content, message.media])).toEqual([["also this text", []]]);
  });

  it("refuses a note longer than maxSeconds, naming both lengths, without uploading it", async () => {
    const { admission, replies } = gate({ maxSeconds: 60 });
    const uploads = server.transcriptions.length;
    expect(await admission.handle(event("5", [voice({ durationSeconds: 450 })]))).toBe("voice-refused");
    expect(replies).toEqual(["Your voice message is 7 min 30 s long; I can transcribe up to 1 min. Please send a shorter one or type it."]);
    expect(server.transcriptions.length).toBe(uploads);
    expect(await queued()).toEqual([]);
  });

  it("refuses a file larger than maxBytes, naming both sizes", async () => {
    const { admission, replies } = gate({ maxBytes: 1_024 });
    const uploads = server.transcriptions.length;
    expect(await admission.handle(event("6", [voice()]))).toBe("voice-refused");
    expect(replies).toEqual(["Your voice message is 2 KB; I can transcribe up to 1 KB. Please send a shorter one or type it."]);
    expect(server.transcriptions.length).toBe(uploads);
  });

  it("tells the sender when the transcription fails", async () => {
    const { admission, replies } = gate({ model: "broken" });
    expect(await admission.handle(event("7", [voice()]))).toBe("voice-refused");
    expect(replies).toEqual(["I couldn't transcribe your voice message: the speech-to-text service failed. Please try again, or type it."]);
  });

  it("is refused as not set up when admission has no voice intake at all", async () => {
    const replies: string[] = [];
    const admission = createAdmission({
      channel: "telegram",
      bus,
      store: { pairing: { isApproved: async () => true } as never },
      adapter: { typing: async () => undefined },
      reply: async (reply) => void replies.push(reply.text),
      policy: { allowFrom: ["42"], groupPolicy: "mention" },
      logger: pino({ level: "silent" }),
    });
    expect(await admission.handle(event("8", [voice()]))).toBe("voice-refused");
    expect(replies).toEqual([VOICE_NOT_SET_UP]);
  });
});

describe("formatDuration", () => {
  it("reads as a person says it", () => {
    expect([formatDuration(45), formatDuration(120), formatDuration(450)]).toEqual(["45 s", "2 min", "7 min 30 s"]);
  });
});
