/**
 * The robot message DingTalk delivers (the Stream topic `/v1.0/im/bot/messages/get`, or the body of
 * an HTTP callback), as far as the channel reads it. Only what is used is declared; the rest passes.
 *
 * `conversationType` "1" is a one-to-one chat, "2" a group. In a group the robot's own @ is removed
 * from `text.content` by DingTalk; whether the robot was @mentioned is said by `isInAtList` and by
 * `atUsers` (which holds the robot's `chatbotUserId` then). Images, files, voice and video carry a
 * `downloadCode` for the message-file download API.
 */
import { z } from "zod";

/** The Stream topic of robot messages. */
export const ROBOT_TOPIC = "/v1.0/im/bot/messages/get";

const AtUserSchema = z.looseObject({ dingtalkId: z.string().optional(), staffId: z.string().optional() });

export const RobotMessageSchema = z.looseObject({
  msgId: z.string().min(1),
  msgtype: z.string().min(1),
  conversationId: z.string().min(1),
  conversationType: z.enum(["1", "2"]),
  conversationTitle: z.string().optional(),
  senderId: z.string().min(1),
  senderStaffId: z.string().optional(),
  senderNick: z.string().optional(),
  chatbotUserId: z.string().optional(),
  robotCode: z.string().optional(),
  isInAtList: z.boolean().optional(),
  atUsers: z.array(AtUserSchema).optional(),
  sessionWebhook: z.string().optional(),
  sessionWebhookExpiredTime: z.number().optional(),
  createAt: z.number().optional(),
  text: z
    .looseObject({
      content: z.string().default(""),
      isReplyMsg: z.boolean().optional(),
      repliedMsg: z.looseObject({ senderId: z.string().optional(), msgId: z.string().optional() }).optional(),
    })
    .optional(),
  content: z.unknown().optional(),
});
export type RobotMessage = z.infer<typeof RobotMessageSchema>;

/** `picture`, `file`, `audio` and `video` contents: what the download and the note need. */
export const MediaContentSchema = z.looseObject({
  downloadCode: z.string().min(1).optional(),
  pictureDownloadCode: z.string().min(1).optional(),
  fileName: z.string().optional(),
  recognition: z.string().optional(),
});

/** A `richText` message: text runs and pictures in order. */
export const RichTextContentSchema = z.looseObject({
  richText: z
    .array(
      z.looseObject({
        text: z.string().optional(),
        type: z.string().optional(),
        downloadCode: z.string().optional(),
        pictureDownloadCode: z.string().optional(),
      }),
    )
    .default([]),
});
