/**
 * The bus's pub/sub side on Redis: cancel requests and broadcasts between processes. Nothing here
 * is durable (a process that is not listening misses a signal, by design: a cancel is for turns
 * running now), so it is plain PUBLISH/SUBSCRIBE on one subscriber connection per bus, opened on
 * the first listen.
 */
import type { RedisClient } from "../redis/client.js";
import type { Subscription } from "./message-bus.js";
import type { BusKeys } from "./redis-keys.js";

export class RedisSignals {
  private subscriber: RedisClient | undefined;
  private readonly listeners = new Map<string, Set<(message: string) => void>>();

  constructor(
    private readonly redis: RedisClient,
    private readonly keys: BusKeys,
  ) {}

  async requestCancel(sessionKey: string): Promise<void> {
    await this.redis.publish(this.keys.cancel, sessionKey);
  }

  onCancel(handler: (sessionKey: string) => void): Promise<Subscription> {
    return this.listen(this.keys.cancel, handler);
  }

  async broadcast(topic: string, payload: string): Promise<void> {
    await this.redis.publish(this.keys.broadcast(topic), payload);
  }

  onBroadcast(topic: string, handler: (payload: string) => void): Promise<Subscription> {
    return this.listen(this.keys.broadcast(topic), handler);
  }

  close(): void {
    this.subscriber?.disconnect();
  }

  /** One subscriber connection for every pub/sub channel this bus listens to. */
  private async listen(channel: string, handler: (message: string) => void): Promise<Subscription> {
    if (!this.subscriber) {
      this.subscriber = this.redis.duplicate();
      this.subscriber.on("message", (from: string, message: string) => {
        for (const listener of this.listeners.get(from) ?? []) listener(message);
      });
    }
    let handlers = this.listeners.get(channel);
    if (!handlers) {
      handlers = new Set();
      this.listeners.set(channel, handlers);
      await this.subscriber.subscribe(channel);
    }
    handlers.add(handler);
    return { close: async () => void handlers.delete(handler) };
  }
}
