/**
 * Lanes: tasks that must not overlap (a chat's deliveries, a file's writes) run one after another
 * in the order they were queued, while different lanes run concurrently. The buses hand a chat's
 * outbound events over through one, the dispatcher sends a chat's chunks through one, the Telegram
 * webhook keeps a chat's updates in order with one, and the file stores serialize a file's writes
 * through KeyedLanes (createKeyedQueue).
 */

/** One lane: each task starts once the one queued before it has settled; a failure does not stop the rest. */
export class ChatLane {
  private pending = 0;
  private tail: Promise<void> = Promise.resolve();

  /** Whether a task is running or queued. */
  get busy(): boolean {
    return this.pending > 0;
  }

  /** Queues `task`; the result is the task's own, failure included. */
  run<T>(task: () => T | PromiseLike<T>): Promise<T> {
    this.pending += 1;
    const result = this.tail.then(task);
    const settled = () => void (this.pending -= 1);
    this.tail = result.then(settled, settled);
    return result;
  }

  /** Resolves once every task queued so far has settled (never rejects). */
  idle(): Promise<void> {
    return this.tail;
  }
}

/**
 * A lane per key (a chat id, a file name), made on first use and dropped once it is idle, so the
 * map does not grow with every key ever seen.
 */
export class KeyedLanes {
  private readonly lanes = new Map<string, ChatLane>();

  /** Queues `task` in the lane of `key`. */
  run<T>(key: string, task: () => T | PromiseLike<T>): Promise<T> {
    let lane = this.lanes.get(key);
    if (!lane) {
      lane = new ChatLane();
      this.lanes.set(key, lane);
    }
    const result = lane.run(task);
    const queued = lane;
    void queued.idle().then(() => {
      if (!queued.busy && this.lanes.get(key) === queued) this.lanes.delete(key);
    });
    return result;
  }

  /** Whether the lane of `key` has a task running or queued. */
  busy(key: string): boolean {
    return this.lanes.get(key)?.busy ?? false;
  }

  /** Lanes kept: an idle lane is dropped once its last task has settled. */
  get size(): number {
    return this.lanes.size;
  }

  /** Resolves once every task queued so far, in every lane, has settled (never rejects). */
  async idle(): Promise<void> {
    await Promise.all([...this.lanes.values()].map((lane) => lane.idle()));
  }
}
