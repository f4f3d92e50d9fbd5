/**
 * Where a message is written: a labelled text box (Enter sends, Shift+Enter starts a new line),
 * images to attach (PNG, JPEG, GIF, WebP; shown before they go), and Stop while a reply streams.
 */
import { useRef, useState } from "preact/hooks";

export interface OutgoingImage {
  name: string;
  mimeType: string;
  /** base64, without the data: prefix */
  data: string;
  /** A data: URL to show it. */
  preview: string;
}

const IMAGE_TYPES = ["image/png", "image/jpeg", "image/gif", "image/webp"];
const MAX_IMAGES = 4;
const MAX_IMAGE_BYTES = 5 * 1024 * 1024;

export function Composer(props: { onSend: (text: string, images: OutgoingImage[]) => Promise<void>; streaming: boolean; onStop: () => void }) {
  const [text, setText] = useState("");
  const [images, setImages] = useState<OutgoingImage[]>([]);
  const [problem, setProblem] = useState<string | undefined>(undefined);
  const files = useRef<HTMLInputElement>(null);

  const submit = (event?: Event) => {
    event?.preventDefault();
    if (text.trim() === "" && images.length === 0) return;
    void props.onSend(text, images);
    setText("");
    setImages([]);
    setProblem(undefined);
  };

  const attach = async (list: FileList | null) => {
    const picked = [...(list ?? [])];
    if (files.current) files.current.value = "";
    const refused = picked.filter((file) => !IMAGE_TYPES.includes(file.type) || file.size > MAX_IMAGE_BYTES);
    const accepted = picked.filter((file) => !refused.includes(file)).slice(0, MAX_IMAGES - images.length);
    setProblem(
      refused.length > 0
        ? `Not attached: ${refused.map((file) => file.name).join(", ")} (PNG, JPEG, GIF or WebP up to 5 MiB)`
        : picked.length > accepted.length
          ? `At most ${MAX_IMAGES} images per message`
          : undefined,
    );
    const read = await Promise.all(accepted.map(readImage));
    setImages((current) => [...current, ...read].slice(0, MAX_IMAGES));
  };

  return (
    <form class="composer" onSubmit={submit} aria-label="Send a message">
      {images.length > 0 && (
        <ul class="attachments" aria-label="Images to send">
          {images.map((image, index) => (
            <li key={`${image.name}-${index}`}>
              <img src={image.preview} alt={image.name} />
              <button type="button" class="link-button" onClick={() => setImages((current) => current.filter((_, at) => at !== index))} aria-label={`Remove ${image.name}`}>
                Remove
              </button>
            </li>
          ))}
        </ul>
      )}
      <div class="composer-row">
        <label for="composer-text" class="visually-hidden">
          Message
        </label>
        <textarea
          id="composer-text"
          rows={2}
          placeholder="Message (Enter sends, Shift+Enter for a new line; /new starts over, /stop cancels)"
          value={text}
          onInput={(event) => setText(event.currentTarget.value)}
          onKeyDown={(event) => {
            if (event.key === "Enter" && !event.shiftKey && !event.isComposing) submit(event);
          }}
          aria-describedby={problem ? "composer-problem" : undefined}
        />
        <label class="file-button">
          <span>Attach images</span>
          <input ref={files} type="file" accept={IMAGE_TYPES.join(",")} multiple onChange={(event) => void attach(event.currentTarget.files)} />
        </label>
        {props.streaming && (
          <button type="button" class="secondary" onClick={props.onStop}>
            Stop
          </button>
        )}
        <button type="submit">Send</button>
      </div>
      {problem && (
        <p id="composer-problem" class="field-error" role="alert">
          {problem}
        </p>
      )}
    </form>
  );
}

function readImage(file: File): Promise<OutgoingImage> {
  return new Promise((resolve, reject) => {
    const reader = new FileReader();
    reader.onload = () => {
      const preview = String(reader.result);
      resolve({ name: file.name, mimeType: file.type, data: preview.slice(preview.indexOf(",") + 1), preview });
    };
    reader.onerror = () => reject(reader.error);
    reader.readAsDataURL(file);
  });
}
