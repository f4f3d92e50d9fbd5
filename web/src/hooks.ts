/** Small hooks the views share: the hash route, and data read from the API now and every few seconds. */
import { useCallback, useEffect, useRef, useState } from "preact/hooks";
import { errorText } from "./api";

/** `#/runs/wf-1` → ["runs", "wf-1"]. Hash routes: the gateway serves one page, whatever the view. */
export function useRoute(): string[] {
  const [hash, setHash] = useState(location.hash);
  useEffect(() => {
    const changed = () => setHash(location.hash);
    window.addEventListener("hashchange", changed);
    return () => window.removeEventListener("hashchange", changed);
  }, []);
  return hash
    .replace(/^#\/?/, "")
    .split("/")
    .filter((part) => part !== "")
    .map((part) => decodeURIComponent(part));
}

export function navigate(...parts: string[]): void {
  location.hash = `#/${parts.map((part) => encodeURIComponent(part)).join("/")}`;
}

export interface Polled<T> {
  data: T | undefined;
  error: string | undefined;
  refresh: () => Promise<void>;
}

/** How long one read may take: a read the server never answers is given up (its signal aborted) and the polling goes on. */
export const POLL_TIMEOUT_MS = 15_000;

/** What `load` gives, or an error "no answer within 15 s" after POLL_TIMEOUT_MS, its signal then aborted. */
export async function withTimeout<T>(load: (signal: AbortSignal) => Promise<T>): Promise<T> {
  const controller = new AbortController();
  const timeout = new Promise<never>((_, reject) => {
    const timer = setTimeout(() => {
      reject(new Error(`no answer within ${POLL_TIMEOUT_MS / 1000} s`));
      controller.abort();
    }, POLL_TIMEOUT_MS);
    controller.signal.addEventListener("abort", () => clearTimeout(timer));
  });
  try {
    return await Promise.race([load(controller.signal), timeout]);
  } finally {
    controller.abort();
  }
}

/**
 * Reads `load()` now and every `intervalMs` (0: once) while the view is shown; `key` changes
 * start it over. A failed read keeps the last data and says why; so does a read not answered
 * within POLL_TIMEOUT_MS, which would otherwise have stopped the polling for good.
 */
export function usePoll<T>(load: (signal: AbortSignal) => Promise<T>, intervalMs: number, key: unknown[] = []): Polled<T> {
  const [data, setData] = useState<T | undefined>(undefined);
  const [error, setError] = useState<string | undefined>(undefined);
  const loadRef = useRef(load);
  loadRef.current = load;
  const refresh = useCallback(async () => {
    try {
      setData(await withTimeout(loadRef.current));
      setError(undefined);
    } catch (caught) {
      setError(errorText(caught));
    }
  }, []);
  useEffect(() => {
    setData(undefined);
    let stopped = false;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const tick = async () => {
      await refresh();
      if (!stopped && intervalMs > 0) timer = setTimeout(() => void tick(), intervalMs);
    };
    void tick();
    return () => {
      stopped = true;
      clearTimeout(timer);
    };
  }, [intervalMs, refresh, ...key]);
  return { data, error, refresh };
}
