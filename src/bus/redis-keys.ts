/**
 * The Redis key layout of the bus. Every key starts with the hash tag `{prefix}`, so all of one
 * deployment's keys live in one cluster slot and the Lua scripts may touch them together. The
 * hash-tag convention every Redis user follows (partition tags `{prefix:p<k>}` for a chat's keys)
 * is in src/redis/keys.ts.
 */
export interface BusKeys {
  mailbox(sessionKey: string): string;
  /** Prefix of the mailbox keys, for the claim script which builds them. */
  mailboxPrefix: string;
  ready: string;
  /** ZSET worker id -> liveness expiry: a lease holds while its worker's entry is later than now. */
  workers: string;
  /** HASH session key -> "<token>:<worker id>" of its lease. */
  own: string;
  fence: string;
  wake: string;
  attempts: string;
  dead: string;
  seen(channel: string, eventId: string): string;
  /** Dedupe marker of a message published without a platform event id (replays of one publish). */
  queued(messageId: string): string;
  /** What one claim call made, so the call replayed hands back the same claim. */
  claimed(claimId: string): string;
  /** Set once a lease (by its token) is dead-lettered, or a batch of acks (by its call id) ran, so the call replayed succeeds. */
  done(id: number | string): string;
  /** The stream entry a fenced publish added, so the publish replayed adds no second one. */
  published(token: number, outboundId: string): string;
  outbound(channel: string): string;
  /** Prefix of the outbound streams, for the batched ack which builds them. */
  outboundPrefix: string;
  draft(replyId: string): string;
  /** The platform message showing a reply's streamed draft (edit streaming), across gateways. */
  draftMessage(channel: string, replyId: string): string;
  /** ZSET of who can see drafts ("<channel>" or "<channel>:<chatId>") → until when. */
  draftAudience: string;
  sent(outboundId: string): string;
  /** Set by the consumer once a final is handled: drafts of that reply queued after it are skipped. */
  finished(replyId: string): string;
  /** Prefix of the finished markers, for the script that sets them. */
  finishedPrefix: string;
  cancel: string;
  broadcast(topic: string): string;
}

export function busKeys(prefix: string): BusKeys {
  const tag = `{${prefix}}`;
  return {
    mailbox: (sessionKey) => `${tag}:in:${sessionKey}`,
    mailboxPrefix: `${tag}:in:`,
    ready: `${tag}:ready`,
    workers: `${tag}:workers`,
    own: `${tag}:own`,
    fence: `${tag}:fence`,
    wake: `${tag}:wake`,
    attempts: `${tag}:attempts`,
    dead: `${tag}:dead`,
    seen: (channel, eventId) => `${tag}:seen:${channel}:${eventId}`,
    queued: (messageId) => `${tag}:queued:${messageId}`,
    claimed: (claimId) => `${tag}:claimed:${claimId}`,
    done: (id) => `${tag}:done:${id}`,
    published: (token, outboundId) => `${tag}:published:${token}:${outboundId}`,
    outbound: (channel) => `${tag}:out:${channel}`,
    outboundPrefix: `${tag}:out:`,
    draft: (replyId) => `${tag}:draft:${replyId}`,
    draftMessage: (channel, replyId) => `${tag}:draftmsg:${channel}:${replyId}`,
    draftAudience: `${tag}:draft-audience`,
    sent: (outboundId) => `${tag}:sent:${outboundId}`,
    finished: (replyId) => `${tag}:finished:${replyId}`,
    finishedPrefix: `${tag}:finished:`,
    cancel: `${tag}:cancel`,
    broadcast: (topic) => `${tag}:broadcast:${topic}`,
  };
}
