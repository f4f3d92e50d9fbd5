/**
 * Which other gateways hold sockets of which web chats, so an event is fanned out over the bus
 * only when another gateway has a page of its chat open: with one gateway (the common case, and
 * `countbot start`), nothing is fanned out at all.
 *
 * Gateways tell each other over the web channel's broadcast topic (lossy pub/sub):
 * - `hello` when one starts; each peer answers with `holding`, its whole list of chats;
 * - `attach` / `detach` when its first socket of a chat opens / its last one closes;
 * - `holding` again every HEARTBEAT_MS, so what a lost message left wrong is right again soon,
 *   and a peer not heard of for three heartbeats (it died) is forgotten;
 * - `bye` when one stops.
 *
 * A chat a peer holds that is not known here yet (its `attach` still on the way) misses drafts and
 * notices for that moment; finals are never missed: they are kept in the chat's log, which the
 * peer reads when its socket opens and once more a moment later (see WebAdapter.attach).
 */
import type { Logger } from "pino";
import type { ChannelDependencies } from "../../src/gateway/kit/index.js";

/** A control message between gateways; events to fan out travel beside them on the same topic. */
export type PeerMessage =
  | { from: string; peer: "hello" | "bye" }
  | { from: string; peer: "attach" | "detach"; chatId: string }
  | { from: string; peer: "holding"; chats: string[] };

const HEARTBEAT_MS = 30_000;
const FORGET_AFTER_MS = 3 * HEARTBEAT_MS;

interface Peer {
  chats: Set<string>;
  seenAt: number;
}

export interface WebPeersOptions {
  bus: Pick<ChannelDependencies["bus"], "broadcast">;
  /** The broadcast topic (the web channel's). */
  topic: string;
  /** This gateway's id in the messages. */
  instance: string;
  /** The chats this gateway holds sockets of now. */
  localChats: () => Iterable<string>;
  logger: Logger;
  now?: () => number;
}

export class WebPeers {
  private readonly peers = new Map<string, Peer>();
  private readonly now: () => number;
  private heartbeat: NodeJS.Timeout | undefined;

  constructor(private readonly options: WebPeersOptions) {
    this.now = options.now ?? Date.now;
  }

  /** Says hello (peers answer with what they hold) and starts the heartbeat. */
  async start(): Promise<void> {
    await this.send({ from: this.options.instance, peer: "hello" });
    this.heartbeat ??= setInterval(() => {
      this.forgetSilentPeers();
      void this.sendHolding();
    }, HEARTBEAT_MS);
    this.heartbeat.unref();
  }

  async stop(): Promise<void> {
    if (this.heartbeat) clearInterval(this.heartbeat);
    this.heartbeat = undefined;
    await this.send({ from: this.options.instance, peer: "bye" });
    this.peers.clear();
  }

  /** Whether another gateway holds a socket of `chatId`. */
  holdsElsewhere(chatId: string): boolean {
    for (const peer of this.peers.values()) if (peer.chats.has(chatId)) return true;
    return false;
  }

  /** Whether any other gateway is known. */
  get any(): boolean {
    return this.peers.size > 0;
  }

  /** This gateway's first socket of `chatId` opened. */
  attached(chatId: string): void {
    void this.send({ from: this.options.instance, peer: "attach", chatId });
  }

  /** This gateway's last socket of `chatId` closed. */
  detached(chatId: string): void {
    void this.send({ from: this.options.instance, peer: "detach", chatId });
  }

  /** Takes a control message from the topic; false when it is not one (an event to deliver). */
  receive(message: Partial<PeerMessage> & { from?: string }): boolean {
    if (typeof message.peer !== "string") return false;
    const from = message.from;
    if (typeof from !== "string" || from === this.options.instance) return true;
    switch (message.peer) {
      case "hello":
        this.peerOf(from);
        void this.sendHolding();
        break;
      case "bye":
        this.peers.delete(from);
        break;
      case "attach":
        if (typeof message.chatId === "string") this.peerOf(from).chats.add(message.chatId);
        break;
      case "detach":
        if (typeof message.chatId === "string") this.peerOf(from).chats.delete(message.chatId);
        break;
      case "holding":
        if (Array.isArray(message.chats)) this.peerOf(from).chats = new Set(message.chats.filter((chat): chat is string => typeof chat === "string"));
        break;
    }
    return true;
  }

  private peerOf(id: string): Peer {
    let peer = this.peers.get(id);
    if (!peer) {
      peer = { chats: new Set(), seenAt: this.now() };
      this.peers.set(id, peer);
    }
    peer.seenAt = this.now();
    return peer;
  }

  private forgetSilentPeers(): void {
    const cutoff = this.now() - FORGET_AFTER_MS;
    for (const [id, peer] of this.peers) if (peer.seenAt < cutoff) this.peers.delete(id);
  }

  private sendHolding(): Promise<void> {
    return this.send({ from: this.options.instance, peer: "holding", chats: [...this.options.localChats()] });
  }

  private async send(message: PeerMessage): Promise<void> {
    try {
      await this.options.bus.broadcast(this.options.topic, JSON.stringify(message));
    } catch (error) {
      this.options.logger.warn({ err: error }, "could not tell the other gateways which web chats this one holds");
    }
  }
}
