/**
 * The transcriber through the real `openai` SDK against the fake `/audio/transcriptions` server:
 * what it uploads, where its key comes from, and the errors that name what to set.
 */
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ConfigSchema } from "../../../src/config/schema.js";
import { ConfigError, ProviderError } from "../../../src/errors.js";
import { probeTranscriber, resolveTranscriber, silentWav, uploadNameOf } from "../../../src/providers/transcription.js";
import { type FakeOpenAIServer, startFakeOpenAI } from "../../support/fake-openai-server.js";

let server: FakeOpenAIServer;
let root: string;
let voiceFile: string;
const VOICE = Buffer.from("OggS\u0000fake opus bytes");

beforeAll(async () => {
  root = await mkdtemp(path.join(tmpdir(), "countbot-transcription-"));
  voiceFile = path.join(root, "unique7.oga");
  await writeFile(voiceFile, VOICE);
  server = await startFakeOpenAI({
    script: [],
    transcriptions: (upload) => {
      if (upload.model === "broken") return { error: { status: 500, message: "the GPU caught fire" } };
      return { text: `  heard ${upload.bytes.length} bytes  ` };
    },
  });
});

afterAll(async () => {
  await server.close();
  await rm(root, { recursive: true, force: true });
});

const configOf = (section: Record<string, unknown>, providers: Record<string, unknown> = {}) => ConfigSchema.parse({ transcription: section, providers });

describe("resolveTranscriber", () => {
  it("is undefined without transcription.model: voice is not set up", () => {
    expect(resolveTranscriber(configOf({}), { env: {} })).toBeUndefined();
  });

  it("uploads the file as multipart with the model id, an extension the API reads, and the language", async () => {
    const transcriber = resolveTranscriber(configOf({ model: "openai/whisper-1", language: "en" }, { openai: { baseURL: server.url } }), { env: { OPENAI_API_KEY: "sk-transcribe" } })!;
    const before = server.transcriptions.length;
    expect(await transcriber.transcribe({ path: voiceFile, mimeType: "audio/ogg" })).toBe(`heard ${VOICE.length} bytes`);
    const upload = server.transcriptions[before]!;
    expect(upload.model).toBe("whisper-1");
    expect(upload.fileName).toBe("unique7.ogg");
    expect(upload.bytes.equals(VOICE)).toBe(true);
    expect(upload.language).toBe("en");
    expect(upload.responseFormat).toBe("json");
    expect(upload.authorization).toBe("Bearer sk-transcribe");
  });

  it("takes the key from <PROVIDER>_API_KEY and the URL from transcription.baseURL", async () => {
    const transcriber = resolveTranscriber(configOf({ model: "groq/whisper-large-v3", baseURL: server.url }), { env: { GROQ_API_KEY: "gsk-voice" } })!;
    const before = server.transcriptions.length;
    await transcriber.transcribe({ path: voiceFile });
    expect(server.transcriptions[before]).toMatchObject({ model: "whisper-large-v3", authorization: "Bearer gsk-voice" });
  });

  it("prefers transcription.apiKey, and sends no key to a local server that has none", async () => {
    const keyed = resolveTranscriber(configOf({ model: "local/whisper", baseURL: server.url, apiKey: "own-key" }), { env: { LOCAL_API_KEY: "other" } })!;
    await keyed.transcribe({ path: voiceFile });
    expect(server.transcriptions.at(-1)?.authorization).toBe("Bearer own-key");
    const keyless = resolveTranscriber(configOf({ model: "local/whisper", baseURL: server.url }), { env: {} })!;
    await keyless.transcribe({ path: voiceFile });
    expect(server.transcriptions.at(-1)?.authorization).toBeUndefined();
  });

  it("turns a failed call into a ProviderError naming the model", async () => {
    const transcriber = resolveTranscriber(configOf({ model: "local/broken", baseURL: server.url }), { env: {} })!;
    const error = await transcriber.transcribe({ path: voiceFile }).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(ProviderError);
    expect((error as ProviderError).message).toContain("local/broken");
    expect((error as ProviderError).kind).toBe("server");
  });

  it("names the variable to set when a hosted provider has no key", () => {
    const attempt = () => resolveTranscriber(configOf({ model: "groq/whisper-large-v3" }), { env: {} });
    expect(attempt).toThrow(ConfigError);
    expect(attempt).toThrow(/GROQ_API_KEY or transcription\.apiKey/);
  });

  it("names transcription.baseURL for a provider with no known URL, and refuses Anthropic", () => {
    expect(() => resolveTranscriber(configOf({ model: "mystery/whisper" }), { env: {} })).toThrow(/Set transcription\.baseURL/);
    expect(() => resolveTranscriber(configOf({ model: "anthropic/claude" }), { env: { ANTHROPIC_API_KEY: "x" } })).toThrow(/no \/audio\/transcriptions endpoint/);
  });

  it("rejects a model that is not provider/model, naming the field", () => {
    const parsed = ConfigSchema.safeParse({ transcription: { model: "whisper-1" } });
    expect(parsed.success).toBe(false);
    expect(parsed.error?.issues[0]?.path).toEqual(["transcription", "model"]);
  });
});

describe("uploadNameOf", () => {
  it("keeps names the API reads and maps Ogg and other types to one it does", () => {
    expect(uploadNameOf({ path: "/d/a.mp3" })).toBe("a.mp3");
    expect(uploadNameOf({ path: "/d/voice.oga" })).toBe("voice.ogg");
    expect(uploadNameOf({ path: "/d/key.opus", mimeType: "audio/opus" })).toBe("key.ogg");
    expect(uploadNameOf({ path: "/d/file", mimeType: "audio/mp4" })).toBe("file.m4a");
    expect(uploadNameOf({ path: "/d/x.bin", mimeType: "audio/wav" })).toBe("x.wav");
  });
});

describe("probeTranscriber (countbot doctor)", () => {
  it("uploads a tenth of a second of silence as WAV, and fails with the service's error", async () => {
    const before = server.transcriptions.length;
    const fine = resolveTranscriber(configOf({ model: "local/whisper", baseURL: server.url }), { env: {} })!;
    expect(await probeTranscriber(fine)).toMatch(/^transcribes \(\d+ ms\)$/);
    const upload = server.transcriptions[before]!;
    expect(upload).toMatchObject({ fileName: "silence.wav", fileType: "audio/wav" });
    expect(upload.bytes.subarray(0, 4).toString()).toBe("RIFF");
    expect(upload.bytes.length).toBe(silentWav().length);
    const broken = resolveTranscriber(configOf({ model: "local/broken", baseURL: server.url }), { env: {} })!;
    await expect(probeTranscriber(broken)).rejects.toThrow(/local\/broken/);
  });
});
