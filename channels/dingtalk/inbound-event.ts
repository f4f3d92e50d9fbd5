/**
 * A DingTalk robot message, normalized into a PlatformEvent.
 *
 * - Chat: a group is its openConversationId, a one-to-one chat `user:<staffId>` (chat-route.ts).
 * - Sender: the staffId (the user id an admin sees and writes into allowFrom) when DingTalk gives
 *   one, else the DingTalk id; the other one is a scope, so the allowlist may name either.
 * - Mentions, from the structured fields only: the robot is mentioned when `isInAtList` says so or
 *   `atUsers` holds its `chatbotUserId`; nothing else counts (fail closed). DingTalk removes the
 *   robot's own @ from the text, so `@Team goal` arrives as typed and the team trigger sees it.
 * - Content: text; rich text (its text runs, its pictures downloaded); picture and file
 *   (downloaded, capped); voice as DingTalk's transcript; anything else a note naming the type.
 * - `eventId` is the `msgId`: a redelivered message dedupes on it.
 */
import type { Media } from "../../src/bus/message.js";
import type { PlatformEvent } from "../../src/gateway/kit/index.js";
import { chatIdOf } from "./chat-route.js";
import type { Attachment, DownloadResult } from "./file-download.js";
import { MediaContentSchema, RichTextContentSchema, type RobotMessage } from "./robot-message.js";

export interface InboundContext {
  download(attachment: Attachment, signal: AbortSignal): Promise<DownloadResult>;
  now(): number;
}

interface Content {
  text: string;
  attachments: Attachment[];
}

const codeOf = (content: { downloadCode?: string; pictureDownloadCode?: string }) => content.downloadCode ?? content.pictureDownloadCode;

function contentOf(message: RobotMessage): Content {
  switch (message.msgtype) {
    case "text":
      return { text: (message.text?.content ?? "").trim(), attachments: [] };
    case "richText": {
      const parsed = RichTextContentSchema.safeParse(message.content);
      if (!parsed.success) return { text: "", attachments: [] };
      const attachments: Attachment[] = [];
      const runs: string[] = [];
      for (const part of parsed.data.richText) {
        const code = codeOf(part);
        if (part.type === "picture" && code) attachments.push({ downloadCode: code, type: "image", label: "image" });
        else if (part.text) runs.push(part.text);
      }
      return { text: runs.join("").trim(), attachments };
    }
    case "picture": {
      const parsed = MediaContentSchema.safeParse(message.content);
      const code = parsed.success ? codeOf(parsed.data) : undefined;
      return { text: "", attachments: code ? [{ downloadCode: code, type: "image", label: "image" }] : [] };
    }
    case "file": {
      const parsed = MediaContentSchema.safeParse(message.content);
      const code = parsed.success ? parsed.data.downloadCode : undefined;
      const name = parsed.success ? parsed.data.fileName : undefined;
      const label = name ? `file "${name}"` : "file";
      return { text: `[${label}]`, attachments: code ? [{ downloadCode: code, type: "file", label, ...(name ? { name } : {}) }] : [] };
    }
    case "audio": {
      const parsed = MediaContentSchema.safeParse(message.content);
      const said = parsed.success ? parsed.data.recognition?.trim() : undefined;
      return { text: said ? `[voice message] ${said}` : "[a voice message]", attachments: [] };
    }
    default:
      return { text: `[a ${message.msgtype} message]`, attachments: [] };
  }
}

/** The robot is mentioned only when DingTalk says so in its own fields. */
export function mentionsRobot(message: RobotMessage): boolean {
  if (message.isInAtList === true) return true;
  const robot = message.chatbotUserId;
  return robot !== undefined && robot !== "" && (message.atUsers ?? []).some((user) => user.dingtalkId === robot);
}

/** Builds the event of one message; downloads its pictures and files first. Rejects only when `signal` aborts. */
export async function toPlatformEvent(message: RobotMessage, context: InboundContext, signal: AbortSignal): Promise<PlatformEvent> {
  const content = contentOf(message);
  const media: Media[] = [];
  const notes: string[] = [];
  for (const attachment of content.attachments) {
    const result = await context.download(attachment, signal);
    if ("media" in result) media.push(result.media);
    else notes.push(result.note);
  }
  const staffId = message.senderStaffId || undefined;
  const senderId = staffId ?? message.senderId;
  const replied = message.text?.isReplyMsg === true ? message.text.repliedMsg : undefined;
  return {
    eventId: message.msgId,
    chatId: chatIdOf(message),
    chatType: message.conversationType === "1" ? "private" : "group",
    senderId,
    ...(message.senderNick ? { senderName: message.senderNick } : {}),
    senderIsBot: message.chatbotUserId !== undefined && message.senderId === message.chatbotUserId,
    ...(staffId && staffId !== message.senderId ? { scopes: [message.senderId] } : {}),
    text: [content.text, ...notes].filter((part) => part.length > 0).join("\n\n"),
    mentionsBot: mentionsRobot(message),
    repliesToBot: replied?.senderId !== undefined && replied.senderId === message.chatbotUserId,
    platformMessageId: message.msgId,
    media,
    receivedAt: context.now(),
    metadata: {
      dingtalkConversationId: message.conversationId,
      ...(message.conversationTitle ? { conversationTitle: message.conversationTitle } : {}),
    },
  };
}
