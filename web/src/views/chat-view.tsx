/**
 * The chat: pick a web chat or start one; messages go out by POST (retried with the same
 * clientMessageId when the network fails, so they are queued once) and the reply streams in over
 * the chat's WebSocket. The transcript and the last seq are kept per chat in localStorage, so a
 * reload or a dropped connection picks up exactly what was missed, once.
 */
import { useEffect, useMemo, useReducer, useRef, useState } from "preact/hooks";
import { ApiError, api, errorText } from "../api";
import { ChatConnection, type ConnectionStatus } from "../chat-connection";
import { navigate } from "../hooks";
import { plainText } from "../markdown";
import { type Transcript, loadTranscript, saveTranscript, transcriptReducer } from "../transcript";
import type { SessionDetail, SessionSummary } from "../types";
import { Composer, type OutgoingImage } from "./composer";
import { TranscriptList } from "./transcript-list";

const LAST_CHAT = "countbot:last-chat";
const KNOWN_CHATS = "countbot:chats";

interface KnownChat {
  id: string;
  title: string;
  updatedAt: string;
}

export function ChatView(props: { chatId?: string }) {
  const chatId = props.chatId;
  useEffect(() => {
    if (chatId) localStorage.setItem(LAST_CHAT, chatId);
    else navigate("chat", localStorage.getItem(LAST_CHAT) ?? newChatId());
  }, [chatId]);
  if (!chatId) return null;
  return <Chat key={chatId} chatId={chatId} />;
}

function Chat(props: { chatId: string }) {
  const { chatId } = props;
  const [transcript, dispatch] = useReducer(transcriptReducer, { items: [] } as Transcript);
  const [status, setStatus] = useState<ConnectionStatus>("connecting");
  const [loaded, setLoaded] = useState(false);
  const [chats, setChats] = useState<KnownChat[]>(() => knownChats());
  const connection = useRef<ChatConnection | undefined>(undefined);

  // First what this page kept (or, for a chat it never showed, the session's history), then the socket from there.
  useEffect(() => {
    let cancelled = false;
    const kept = loadTranscript(chatId);
    const open = (after: string | undefined) => {
      if (cancelled) return;
      setLoaded(true);
      connection.current = new ChatConnection({
        chatId,
        after,
        onEvent: (event) => dispatch({ type: "event", event }),
        onSeq: (seq) => dispatch({ type: "seq", seq }),
        onStatus: setStatus,
      });
    };
    if (kept) {
      dispatch({ type: "load", transcript: kept });
      open(kept.seq);
    } else {
      api<SessionDetail>(`/api/sessions/${encodeURIComponent(`web:${chatId}`)}`)
        .then((session) => dispatch({ type: "history", entries: session.history }))
        .catch(() => undefined)
        .finally(() => open(undefined));
    }
    return () => {
      cancelled = true;
      connection.current?.close();
      connection.current = undefined;
    };
  }, [chatId]);

  useEffect(() => {
    if (loaded) saveTranscript(chatId, transcript);
  }, [chatId, transcript, loaded]);

  useEffect(() => {
    api<SessionSummary[]>("/api/sessions?channel=web&limit=100")
      .then((sessions) => setChats(mergeChats(knownChats(), sessions)))
      .catch(() => undefined);
  }, [chatId]);

  const send = async (text: string, images: OutgoingImage[]) => {
    const id = `m-${crypto.randomUUID()}`;
    dispatch({ type: "user", item: { kind: "user", id, text, images: images.map((image) => image.preview), imageCount: images.length, status: "sending" } });
    rememberChat(chatId, text);
    setChats(knownChats());
    const body = { content: text, clientMessageId: id, ...(images.length ? { images: images.map(({ name, mimeType, data }) => ({ name, mimeType, data })) } : {}) };
    for (let attempt = 0; ; attempt += 1) {
      try {
        await api(`/api/chat/${encodeURIComponent(chatId)}/messages`, { method: "POST", body });
        dispatch({ type: "user-status", id, status: "sent" });
        if (text.trim().toLowerCase() === "/new") dispatch({ type: "divider", id: `divider-${id}`, text: "New session: the history starts again here" });
        return;
      } catch (error) {
        // The same clientMessageId again: a message the server did store is not queued twice.
        const retryable = !(error instanceof ApiError) || error.status === 503;
        if (!retryable || attempt >= 4) {
          dispatch({ type: "user-status", id, status: "failed", error: errorText(error) });
          return;
        }
        await new Promise((resolve) => setTimeout(resolve, 500 * 2 ** attempt));
      }
    }
  };

  const streaming = transcript.items.some((item) => item.kind === "assistant" && item.streaming);
  // An option shows text only: a title is what its Markdown reads as (titles kept before this were not).
  const choices = useMemo(() => chats.map((chat) => ({ id: chat.id, label: plainText(chat.title) || chat.id })), [chats]);

  return (
    <section class="chat" aria-labelledby="chat-title">
      <div class="chat-head">
        <h1 id="chat-title" class="visually-hidden">
          Chat {chatId}
        </h1>
        <label for="chat-picker">Chat</label>
        <select id="chat-picker" value={chatId} onChange={(event) => navigate("chat", event.currentTarget.value)}>
          {chats.some((chat) => chat.id === chatId) ? null : <option value={chatId}>{chatId} (new)</option>}
          {choices.map((chat) => (
            <option key={chat.id} value={chat.id}>
              {chat.label}
            </option>
          ))}
        </select>
        <button type="button" onClick={() => navigate("chat", newChatId())}>
          New chat
        </button>
        <span class="connection" data-status={status} role="status">
          {statusText(status)}
        </span>
      </div>
      <TranscriptList items={transcript.items} />
      <Composer onSend={send} streaming={streaming} onStop={() => void send("/stop", [])} />
    </section>
  );
}

function statusText(status: ConnectionStatus): string {
  switch (status) {
    case "open":
      return "Connected";
    case "connecting":
      return "Connecting…";
    case "reconnecting":
      return "Connection lost: reconnecting…";
    case "closed":
      return "Closed";
  }
}

function newChatId(): string {
  return `chat-${crypto.randomUUID().slice(0, 8)}`;
}

function knownChats(): KnownChat[] {
  try {
    return (JSON.parse(localStorage.getItem(KNOWN_CHATS) ?? "[]") as KnownChat[]).sort((a, b) => b.updatedAt.localeCompare(a.updatedAt));
  } catch {
    return [];
  }
}

/** Names the chat after its first message (as it reads, without Markdown), and moves it to the top. */
function rememberChat(id: string, text: string): void {
  const chats = knownChats();
  const existing = chats.find((chat) => chat.id === id);
  const title = existing?.title ?? (plainText(text).slice(0, 40) || id);
  const next = [{ id, title, updatedAt: new Date().toISOString() }, ...chats.filter((chat) => chat.id !== id)].slice(0, 100);
  localStorage.setItem(KNOWN_CHATS, JSON.stringify(next));
}

/** This browser's chats and the web chats the server knows (opened elsewhere, say), newest first. */
function mergeChats(local: KnownChat[], sessions: SessionSummary[]): KnownChat[] {
  const merged = new Map(local.map((chat) => [chat.id, chat]));
  for (const session of sessions) {
    if (!merged.has(session.chatId)) merged.set(session.chatId, { id: session.chatId, title: session.chatId, updatedAt: session.updatedAt });
  }
  return [...merged.values()].sort((a, b) => b.updatedAt.localeCompare(a.updatedAt));
}
