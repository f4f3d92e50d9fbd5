/**
 * The XML of a WeCom application callback, after its signature was checked and it was decrypted.
 *
 * The outer body (`<xml><ToUserName/><AgentID/><Encrypt/></xml>`) is never parsed before the
 * signature check: {@link encryptedField} takes the `Encrypt` field's Base64 by one strict pattern
 * and nothing else. Only the decrypted message goes through the XML parser (fast-xml-parser, every
 * value kept as text: a MsgId is larger than a JavaScript number holds).
 */
import { XMLParser } from "fast-xml-parser";
import { z } from "zod";

const ENCRYPT = /<Encrypt>\s*(?:<!\[CDATA\[([A-Za-z0-9+/=]{1,1048576})\]\]>|([A-Za-z0-9+/=]{1,1048576}))\s*<\/Encrypt>/;

/** The `Encrypt` field of a callback body, or undefined when there is none. */
export function encryptedField(body: string): string | undefined {
  const match = ENCRYPT.exec(body);
  return match ? (match[1] ?? match[2]) : undefined;
}

const text = z.string();

export const AppMessageSchema = z.looseObject({
  ToUserName: text,
  FromUserName: text.min(1),
  CreateTime: text.regex(/^\d+$/),
  MsgType: text.min(1),
  AgentID: text.optional(),
  MsgId: text.optional(),
  Content: text.optional(),
  PicUrl: text.optional(),
  MediaId: text.optional(),
  Format: text.optional(),
  Recognition: text.optional(),
  FileName: text.optional(),
  Title: text.optional(),
  Url: text.optional(),
  Label: text.optional(),
  Event: text.optional(),
});
export type AppMessage = z.infer<typeof AppMessageSchema>;

const parser = new XMLParser({ parseTagValue: false, ignoreAttributes: true, processEntities: true, trimValues: true, ignoreDeclaration: true });

/** The decrypted message, or one line saying what is wrong with it. */
export function parseAppMessage(xml: string): { success: true; data: AppMessage } | { success: false; error: string } {
  let parsed: unknown;
  try {
    parsed = parser.parse(xml, true);
  } catch (error) {
    return { success: false, error: `message: not XML (${error instanceof Error ? error.message.split("\n")[0] : String(error)})` };
  }
  const root = (parsed as { xml?: unknown } | undefined)?.xml;
  const result = AppMessageSchema.safeParse(root);
  if (result.success) return { success: true, data: result.data };
  const issue = result.error.issues[0]!;
  return { success: false, error: `message.${issue.path.join(".") || "xml"}: ${issue.message}` };
}
