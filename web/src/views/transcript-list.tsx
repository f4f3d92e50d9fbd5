/** The chat's lines: the user's messages as typed, replies as sanitized Markdown, one line per tool call and notice. */
import { useEffect, useRef } from "preact/hooks";
import { Markdown } from "../markdown";
import { type TranscriptItem, replyText } from "../transcript";

export function TranscriptList(props: { items: TranscriptItem[] }) {
  const list = useRef<HTMLDivElement>(null);
  const pinned = useRef(true);
  /** Where this list last scrolled itself to. */
  const followedTo = useRef(0);

  // Follow the conversation unless the reader scrolled up to read something.
  useEffect(() => {
    const element = list.current;
    if (!element || !pinned.current) return;
    element.scrollTop = element.scrollHeight;
    followedTo.current = element.scrollTop;
  }, [props.items]);

  // Only the reader moving up unpins: the scroll event of the list's own scroll can arrive after
  // the next reply grew the list, when it no longer looks like the bottom.
  const onScroll = (element: HTMLDivElement) => {
    const atBottom = element.scrollHeight - element.scrollTop - element.clientHeight < 40;
    if (atBottom) pinned.current = true;
    else if (element.scrollTop < followedTo.current - 1) pinned.current = false;
  };

  return (
    <div
      ref={list}
      class="transcript"
      role="log"
      aria-live="polite"
      aria-label="Conversation"
      tabIndex={0}
      onScroll={(event) => onScroll(event.currentTarget)}
    >
      <ol class="lines">
        {props.items.length === 0 && <li class="empty">No messages yet. Say hello.</li>}
        {props.items.map((item) => (
          <Line key={`${item.kind}-${item.id}`} item={item} />
        ))}
      </ol>
    </div>
  );
}

function Line(props: { item: TranscriptItem }) {
  const { item } = props;
  switch (item.kind) {
    case "user":
      return (
        <li class="message user" data-kind="user" data-status={item.status}>
          <span class="visually-hidden">You: </span>
          {item.text && <p class="plain">{item.text}</p>}
          {item.images.length > 0 && (
            <div class="thumbnails">
              {item.images.map((image, index) => (
                <img key={index} src={image} alt={`attached image ${index + 1}`} />
              ))}
            </div>
          )}
          {item.images.length === 0 && item.imageCount > 0 && <p class="hint">({item.imageCount} image{item.imageCount === 1 ? "" : "s"})</p>}
          {item.status === "sending" && <p class="hint">sending…</p>}
          {item.status === "failed" && <p class="field-error">Not sent: {item.error}</p>}
        </li>
      );
    case "assistant":
      return (
        <li class={`message assistant${item.streaming ? " streaming" : ""}`} data-kind="assistant" data-id={item.id} aria-busy={item.streaming ? "true" : undefined}>
          <span class="visually-hidden">CountBot: </span>
          <Markdown text={replyText(item)} />
        </li>
      );
    case "tool":
      return (
        <li class="tool-line" data-kind="tool">
          <span aria-hidden="true">⚙ </span>
          <span class="visually-hidden">Tool call: </span>
          <code>{item.text}</code>
        </li>
      );
    case "notice":
      return (
        <li class="notice-line" data-kind="notice">
          {item.text}
        </li>
      );
    case "reasoning":
      return (
        <li class="reasoning-line" data-kind="reasoning">
          <span class="visually-hidden">Reasoning: </span>
          {item.text}
        </li>
      );
    case "divider":
      return (
        <li class="divider" data-kind="divider">
          {item.text}
        </li>
      );
  }
}
