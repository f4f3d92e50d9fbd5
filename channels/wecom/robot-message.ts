/**
 * An intelligent robot's message frame (`aibot_msg_callback`), normalized into a PlatformEvent.
 *
 * - Chat: a one-to-one chat is the member's userid (`chattype: single`); a group its `chatid`.
 *   Replies are pushed to the same ids.
 * - Mentions: WeCom delivers a robot only the group messages that @ it, and writes `@<robot name>`
 *   into their text. With the robot's name configured a group message counts as addressed only when
 *   it carries that `@<name>`; without, every group message delivered does. The `@<name>` is taken
 *   out of the text, so `@Team goal` after it reaches the team trigger as typed.
 * - Content: text; voice as WeCom's transcript; mixed as its text runs; a quoted message as a
 *   line before the text. Images and files in robot mode arrive as encrypted URLs that are not
 *   fetched: a note names them.
 * - `eventId` is the `msgid`.
 */
import { z } from "zod";
import type { PlatformEvent } from "../../src/gateway/kit/index.js";

const Text = z.looseObject({ content: z.string().default("") });

export const RobotFrameBodySchema = z.looseObject({
  msgid: z.string().min(1),
  aibotid: z.string().optional(),
  chatid: z.string().optional(),
  chattype: z.enum(["single", "group"]),
  from: z.looseObject({ userid: z.string().min(1) }),
  create_time: z.number().optional(),
  msgtype: z.string().min(1),
  text: Text.optional(),
  voice: Text.optional(),
  mixed: z.looseObject({ msg_item: z.array(z.looseObject({ msgtype: z.string(), text: Text.optional() })).default([]) }).optional(),
  quote: z.looseObject({ msgtype: z.string(), text: Text.optional() }).optional(),
});
export type RobotFrameBody = z.infer<typeof RobotFrameBodySchema>;

export function robotChatIdOf(body: Pick<RobotFrameBody, "chattype" | "chatid" | "from">): string {
  return body.chattype === "group" && body.chatid ? body.chatid : body.from.userid;
}

function contentOf(body: RobotFrameBody): string {
  switch (body.msgtype) {
    case "text":
      return body.text?.content ?? "";
    case "voice":
      return `[voice message] ${body.voice?.content ?? ""}`.trim();
    case "mixed":
      return (body.mixed?.msg_item ?? []).map((item) => (item.msgtype === "text" ? (item.text?.content ?? "") : `[${item.msgtype}]`)).join(" ");
    case "image":
    case "file":
    case "video":
      return `[a ${body.msgtype} the robot cannot fetch]`;
    default:
      return `[a ${body.msgtype} message]`;
  }
}

const escape = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");

export function toRobotEvent(body: RobotFrameBody, robotName: string | undefined, now: number): PlatformEvent {
  let text = contentOf(body).trim();
  let mentioned = body.chattype === "group" && robotName === undefined;
  if (robotName) {
    const at = new RegExp(`(^|\\s)@${escape(robotName)}(?=\\s|$)`, "u");
    if (at.test(text)) {
      mentioned = true;
      text = text.replace(at, " ").trim();
    }
  }
  const quoted = body.quote?.text?.content;
  return {
    eventId: body.msgid,
    chatId: robotChatIdOf(body),
    chatType: body.chattype === "group" ? "group" : "private",
    senderId: body.from.userid,
    senderIsBot: false,
    text: quoted ? `> ${quoted.trim()}\n\n${text}` : text,
    mentionsBot: body.chattype === "group" && mentioned,
    repliesToBot: false,
    platformMessageId: body.msgid,
    media: [],
    receivedAt: now,
    metadata: { wecomChatType: body.chattype, ...(body.aibotid ? { wecomBotId: body.aibotid } : {}) },
  };
}
