/**
 * The fake of OpenAI's speech-to-text endpoint (`POST /v1/audio/transcriptions`): a multipart
 * upload (`file`, `model`, `language`, `response_format`), parsed with the platform's own
 * multipart reader (undici's `Response.formData`), recorded, and answered as the test's function
 * says: `{ "text": ... }` like OpenAI and Groq, or an error in OpenAI's shape.
 */
import type { IncomingHttpHeaders, ServerResponse } from "node:http";
import { sendJson, wait } from "./scripted-http-server.js";

/** One upload as the server received it. */
export interface RecordedTranscription {
  model: string;
  /** The file part's name (the API reads the format from its extension). */
  fileName: string;
  /** The file part's content type. */
  fileType: string;
  bytes: Buffer;
  language?: string;
  responseFormat?: string;
  /** The Authorization header, if any. */
  authorization?: string;
}

export interface FakeTranscriptionStep {
  /** The words heard. */
  text?: string;
  /** Answer with this HTTP status and message instead. */
  error?: { status: number; message?: string };
  /** Wait this long before answering. */
  delayMs?: number;
}

export type TranscriptionScript = (upload: RecordedTranscription, index: number) => FakeTranscriptionStep;

export function transcriptionRoute(script: TranscriptionScript, recorded: RecordedTranscription[]) {
  return async (body: Buffer, headers: IncomingHttpHeaders, response: ServerResponse): Promise<void> => {
    const contentType = headers["content-type"] ?? "";
    if (!contentType.startsWith("multipart/form-data")) return sendError(response, 400, `expected multipart/form-data, got "${contentType}"`);
    const form = await new Response(new Uint8Array(body), { headers: { "content-type": contentType } }).formData();
    const file = form.get("file");
    const model = form.get("model");
    if (!(file instanceof File)) return sendError(response, 400, "the `file` part is missing");
    if (typeof model !== "string" || model === "") return sendError(response, 400, "the `model` part is missing");
    const text = (name: string) => {
      const value = form.get(name);
      return typeof value === "string" ? value : undefined;
    };
    const upload: RecordedTranscription = {
      model,
      fileName: file.name,
      fileType: file.type,
      bytes: Buffer.from(await file.arrayBuffer()),
      ...optional("language", text("language")),
      ...optional("responseFormat", text("response_format")),
      ...optional("authorization", headers.authorization),
    };
    const index = recorded.length;
    recorded.push(upload);
    const step = script(upload, index);
    if (step.delayMs && !(await wait(step.delayMs, response))) return;
    if (step.error) return sendError(response, step.error.status, step.error.message ?? `fake error ${step.error.status}`);
    sendJson(response, 200, { text: step.text ?? "" });
  };
}

function optional<K extends string>(key: K, value: string | undefined): Partial<Record<K, string>> {
  return value === undefined ? {} : ({ [key]: value } as Record<K, string>);
}

function sendError(response: ServerResponse, status: number, message: string): void {
  sendJson(response, status, { error: { message, type: status >= 500 ? "server_error" : "invalid_request_error", param: null, code: null } });
}
