/**
 * A chat's WebSocket that survives network drops: it reconnects (soon, then less often; at once
 * when the browser says it is online again) with `after=<the last seq it saw>`, so the gateway
 * sends exactly what was missed. Events seen already (by type, id and part) are passed on once,
 * whatever the server or a retry does.
 */
import type { WebEvent } from "./types";

export type ConnectionStatus = "connecting" | "open" | "reconnecting" | "closed";

export interface ChatConnectionOptions {
  chatId: string;
  /** Resume after this seq (the page's stored one); without it the gateway sends what no socket was sent yet. */
  after?: string;
  onEvent: (event: WebEvent) => void;
  onStatus?: (status: ConnectionStatus) => void;
  /** Called with each new seq, to store it. */
  onSeq?: (seq: string) => void;
}

const RETRY_DELAYS_MS = [300, 1_000, 2_000, 5_000];
const MAX_REMEMBERED = 2_000;

export class ChatConnection {
  private socket: WebSocket | undefined;
  private lastSeq: string | undefined;
  private attempt = 0;
  private timer: ReturnType<typeof setTimeout> | undefined;
  private stopped = false;
  private readonly seen = new Set<string>();
  private readonly online = () => this.reconnectNow();

  constructor(private readonly options: ChatConnectionOptions) {
    this.lastSeq = options.after;
    window.addEventListener("online", this.online);
    this.connect();
  }

  /** The newest seq received (the resume token). */
  get seq(): string | undefined {
    return this.lastSeq;
  }

  close(): void {
    this.stopped = true;
    window.removeEventListener("online", this.online);
    clearTimeout(this.timer);
    this.socket?.close(1000, "page left the chat");
    this.options.onStatus?.("closed");
  }

  private connect(): void {
    if (this.stopped) return;
    const scheme = location.protocol === "https:" ? "wss" : "ws";
    const query = new URLSearchParams({ chatId: this.options.chatId });
    if (this.lastSeq !== undefined) query.set("after", this.lastSeq);
    this.options.onStatus?.(this.attempt === 0 ? "connecting" : "reconnecting");
    const socket = new WebSocket(`${scheme}://${location.host}/ws?${query.toString()}`);
    this.socket = socket;
    socket.onopen = () => {
      this.attempt = 0;
      this.options.onStatus?.("open");
    };
    socket.onmessage = (message) => this.receive(String(message.data));
    socket.onclose = () => {
      if (this.socket !== socket || this.stopped) return;
      this.socket = undefined;
      this.options.onStatus?.("reconnecting");
      const delay = RETRY_DELAYS_MS[Math.min(this.attempt, RETRY_DELAYS_MS.length - 1)]!;
      this.attempt += 1;
      this.timer = setTimeout(() => this.connect(), delay);
    };
  }

  private reconnectNow(): void {
    if (this.stopped || this.socket) return;
    clearTimeout(this.timer);
    this.connect();
  }

  private receive(data: string): void {
    let event: WebEvent;
    try {
      event = JSON.parse(data) as WebEvent;
    } catch {
      return;
    }
    if (event.type !== "draft") {
      const key = `${event.type}:${event.id}#${event.type === "message" ? (event.part ?? 0) : 0}`;
      if (event.seq !== undefined) {
        this.lastSeq = event.seq;
        this.options.onSeq?.(event.seq);
      }
      if (this.seen.has(key)) return;
      this.seen.add(key);
      if (this.seen.size > MAX_REMEMBERED) this.seen.delete(this.seen.values().next().value!);
    }
    this.options.onEvent(event);
  }
}
