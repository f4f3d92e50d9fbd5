/**
 * QQ's reply window, per chat: a bot's message into a group or C2C chat is a passive reply to a
 * user's message (`msg_id`), numbered (`msg_seq`, rising from 1), within 5 minutes of it and at
 * most 5 times; a guild channel's names the message within 5 minutes, uncounted. This keeps, in
 * memory, each chat's latest message and what was spent of it:
 *
 * - a send that names the message it replies to (`replyTo`, the first part of a reply) uses it, and
 *   the chat's later parts use it too; one that names none (a background result, a reply's later
 *   parts) uses the chat's latest message while the window is open;
 * - a key sent before is not sent again: its message's id is returned (QQ would refuse the seq);
 * - a message another gateway replied to before a failover is not known here: its `msg_seq`s start
 *   at 1 again, and each one QQ says was used already moves on to the next (see message-sender.ts).
 */
import { ExpiringMap } from "../../src/gateway/kit/index.js";
import { REPLIES_PER_MESSAGE, REPLY_WINDOW_MS } from "./quotas.js";

export interface Passive {
  msgId: string;
  /** Absent for guild chats, which take no sequence. */
  seq?: number;
  /** The message QQ made of this key's earlier send, when this key went out before. */
  sentAs?: string;
}

interface Trigger {
  msgId: string;
  /** When it came, as far as we know (a message only named by a `replyTo` counts from when it was named). */
  at: number;
  /** The next `msg_seq`. */
  nextSeq: number;
  /** No more passive replies: counted out, or refused by QQ. */
  closed: boolean;
}

/** Passive replies stop this long before QQ's window closes, so that a send in flight still lands. */
const SAFETY_MS = 10_000;
/** How long a message is remembered: well past its window, so that one known to be too old is not taken for a new one. */
const KEEP_MS = 6 * REPLY_WINDOW_MS;

export class ReplyWindow {
  private readonly latest: ExpiringMap<Trigger>;
  private readonly triggers: ExpiringMap<Trigger>;
  private readonly sentByKey: ExpiringMap<{ seq: number; id: string }>;

  constructor(private readonly now: () => number) {
    this.latest = new ExpiringMap(KEEP_MS, now);
    this.triggers = new ExpiringMap(KEEP_MS, now);
    this.sentByKey = new ExpiringMap(KEEP_MS, now);
  }

  /** A user's message came into a chat: the chat's replies go to it from now on. */
  received(chatId: string, msgId: string): void {
    const trigger = this.triggerOf(msgId);
    this.latest.set(chatId, trigger);
  }

  /** The message a send replies to, or undefined when the window is closed for it. */
  passiveFor(chatId: string, options: { replyTo?: string; counted: boolean; key?: string }): Passive | undefined {
    let trigger = options.replyTo ? this.triggerOf(options.replyTo) : this.latest.get(chatId);
    if (options.replyTo && trigger && !this.latest.has(chatId)) this.latest.set(chatId, trigger);
    if (!trigger || trigger.closed || this.now() - trigger.at > REPLY_WINDOW_MS - SAFETY_MS) trigger = undefined;
    if (!trigger) return undefined;
    if (!options.counted) return { msgId: trigger.msgId };
    const keyed = options.key ? this.sentByKey.get(`${trigger.msgId}\n${options.key}`) : undefined;
    if (keyed !== undefined) return { msgId: trigger.msgId, seq: keyed.seq, sentAs: keyed.id };
    if (trigger.nextSeq > REPLIES_PER_MESSAGE) return undefined;
    return { msgId: trigger.msgId, seq: trigger.nextSeq };
  }

  /** A passive reply went out with `seq` as message `sent.id` (or QQ said that seq was used): the next one takes the seq after it. */
  spent(passive: Passive, sent?: { key?: string; id: string }): void {
    const trigger = this.triggers.get(passive.msgId);
    if (!trigger || passive.seq === undefined) return;
    trigger.nextSeq = Math.max(trigger.nextSeq, passive.seq + 1);
    if (sent?.key) this.sentByKey.set(`${passive.msgId}\n${sent.key}`, { seq: passive.seq, id: sent.id });
  }

  /** QQ refused a passive reply to this message: its window is closed. */
  close(msgId: string): void {
    const trigger = this.triggers.get(msgId);
    if (trigger) trigger.closed = true;
  }

  private triggerOf(msgId: string): Trigger {
    let trigger = this.triggers.get(msgId);
    if (!trigger) {
      trigger = { msgId, at: this.now(), nextSeq: 1, closed: false };
      this.triggers.set(msgId, trigger);
    }
    return trigger;
  }
}
