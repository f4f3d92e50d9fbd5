/**
 * How a reply's growing text reaches the chat while it streams: as drafts, few enough for the
 * platforms' edit limits and none for a reply that is done quickly (see DraftThrottle).
 */

/**
 * Publishes the growing text of a reply at most once per interval, the first time only once the
 * reply has streamed for a whole interval: a reply that is done sooner costs no draft at all (its
 * final follows at once). When the bus says nobody can see the chat's drafts, none is published
 * for a while, then it asks again (a page may have opened meanwhile).
 */
export class DraftThrottle {
  private text = "";
  private published = "";
  private lastSent = Number.NEGATIVE_INFINITY;
  private startedAt: number | undefined;
  private unwatchedUntil = Number.NEGATIVE_INFINITY;
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;

  constructor(
    private readonly intervalMs: number,
    private readonly publish: (text: string) => Promise<boolean>,
  ) {}

  append(piece: string): void {
    this.text += piece;
    const now = Date.now();
    this.startedAt ??= now;
    if (this.timer || this.stopped) return;
    const due = Math.max(this.startedAt + this.intervalMs, this.lastSent + this.intervalMs, this.unwatchedUntil);
    if (due <= now) this.flush();
    else this.timer = setTimeout(() => this.flush(), due - now);
  }

  /** The turn is over: nothing more is published. */
  stop(): void {
    this.stopped = true;
    this.clearTimer();
  }

  flush(): void {
    this.clearTimer();
    if (this.stopped || this.text === "" || this.text === this.published || Date.now() < this.unwatchedUntil) return;
    const text = this.text;
    this.published = text;
    this.lastSent = Date.now();
    // Drafts are lossy by design: a failed one is replaced by the next or by the final.
    this.publish(text).then(
      (seen) => {
        if (seen || this.stopped) return;
        // Nobody watched yet (a page may open meanwhile): the newest text is tried again later,
        // even when no more text comes (a model thinking for a while).
        this.unwatchedUntil = Date.now() + UNWATCHED_RECHECK_MS;
        if (this.published === text) this.published = "";
        if (!this.timer) this.timer = setTimeout(() => this.flush(), UNWATCHED_RECHECK_MS);
      },
      () => undefined,
    );
  }

  private clearTimer(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
  }
}

/** After a draft nobody could see, the next one is tried this much later. */
const UNWATCHED_RECHECK_MS = 2_000;
