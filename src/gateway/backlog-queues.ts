/**
 * Waiting lines, one per key (a budget), in which the task of the longest backlog goes first:
 * tasks of one key run one after another, and when one settles the next to start is the waiting
 * task with the most work queued behind it (its `backlog`); among equal backlogs the one waiting
 * longest (the earliest `since`: when its reply was published), then the first queued here.
 *
 * The send governor queues calls for a budget here. Serving the longest backlog first is what
 * ends a burst soonest: a busy group's next final comes back to the bot's budget one at a time (its
 * chat's window paces it), and first-come order would put each behind every single-message chat
 * that queued meanwhile, stretching the group's twenty finals over the whole burst. Its last final
 * has nothing behind it, but was published with the rest: it goes before the chats' finals
 * published after it.
 */

/** Where a task stands: more work behind it first, then the older reply. */
export interface Rank {
  backlog: number;
  /** When the reply the call belongs to was published (ms since the epoch). */
  since: number;
}

interface Waiting extends Rank {
  start: () => void;
}

/** Whether `a` goes before `b`; `tie` says what an equal rank does. */
function ahead(a: Rank, b: Rank, tie: boolean): boolean {
  if (a.backlog !== b.backlog) return a.backlog > b.backlog;
  if (a.since !== b.since) return a.since < b.since;
  return tie;
}

class BacklogQueue {
  running = false;
  readonly waiting: Waiting[] = [];

  /** Places the task among the waiting: behind every task that ranks higher, and one that ranks equal unless it came `first`. */
  add(entry: Waiting, first = false): void {
    let index = this.waiting.length;
    while (index > 0 && ahead(entry, this.waiting[index - 1]!, first)) index -= 1;
    this.waiting.splice(index, 0, entry);
  }
}

export class BacklogQueues {
  private readonly queues = new Map<string, BacklogQueue>();

  /** Whether a task of `key` is running or waiting. */
  busy(key: string): boolean {
    return this.queues.has(key);
  }

  /** Whether a task waiting for `key` ranks higher than `rank`. */
  outranked(key: string, rank: Rank): boolean {
    const first = this.queues.get(key)?.waiting[0];
    return first !== undefined && ahead(first, rank, false);
  }

  /**
   * The running task of `key` steps back behind the waiting ones that rank higher (the governor's
   * first waiter, woken when room came, lets a busier chat that queued meanwhile take it). Resolves
   * when its turn comes again.
   */
  yield(key: string, rank: Rank): Promise<void> {
    const line = this.queues.get(key);
    if (!line) return Promise.resolve();
    return new Promise<void>((resolve) => {
      const start = () => {
        line.running = true;
        resolve();
      };
      // It ran before every waiting task of its rank: it stays ahead of them.
      line.add({ ...rank, start }, true);
      line.running = false;
      line.waiting.shift()!.start();
    });
  }

  /** Runs `task` once every task of `key` that ranks higher, or equal and queued before it, has settled. */
  run<T>(key: string, rank: Rank, task: () => Promise<T>): Promise<T> {
    let queue = this.queues.get(key);
    if (!queue) this.queues.set(key, (queue = new BacklogQueue()));
    const line = queue;
    return new Promise<T>((resolve, reject) => {
      const start = () => {
        line.running = true;
        task()
          .then(resolve, reject)
          .finally(() => this.next(key, line));
      };
      if (line.running) line.add({ ...rank, start });
      else start();
    });
  }

  private next(key: string, line: BacklogQueue): void {
    line.running = false;
    const following = line.waiting.shift();
    if (following) following.start();
    else if (this.queues.get(key) === line) this.queues.delete(key);
  }
}
