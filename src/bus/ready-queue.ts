/**
 * Sessions waiting to be claimed, ordered by due time (then by arrival). A binary heap, so a
 * worker with ten thousand waiting sessions still claims in O(log n). Each session is in it at
 * most once: `schedule` keeps the earlier due time, like ZADD NX.
 */
interface Entry {
  sessionKey: string;
  dueAt: number;
  sequence: number;
}

export class ReadyQueue {
  private heap: Entry[] = [];
  private dueBySession = new Map<string, number>();
  private sequence = 0;

  get size(): number {
    return this.dueBySession.size;
  }

  has(sessionKey: string): boolean {
    return this.dueBySession.has(sessionKey);
  }

  /** Adds the session unless it is already waiting (the first due time wins). */
  schedule(sessionKey: string, dueAt: number): void {
    if (this.dueBySession.has(sessionKey)) return;
    this.dueBySession.set(sessionKey, dueAt);
    this.push({ sessionKey, dueAt, sequence: this.sequence++ });
  }

  delete(sessionKey: string): void {
    // Lazy deletion: the heap entry is skipped when it surfaces.
    this.dueBySession.delete(sessionKey);
  }

  /** Removes and returns the earliest session due at or before `now`. */
  popDue(now: number): string | undefined {
    while (this.heap.length > 0) {
      const top = this.heap[0]!;
      if (this.dueBySession.get(top.sessionKey) !== top.dueAt) {
        this.pop();
        continue;
      }
      if (top.dueAt > now) return undefined;
      this.pop();
      this.dueBySession.delete(top.sessionKey);
      return top.sessionKey;
    }
    return undefined;
  }

  /** When the next session becomes due, if any is waiting. */
  nextDueAt(): number | undefined {
    while (this.heap.length > 0) {
      const top = this.heap[0]!;
      if (this.dueBySession.get(top.sessionKey) === top.dueAt) return top.dueAt;
      this.pop();
    }
    return undefined;
  }

  private before(left: Entry, right: Entry): boolean {
    return left.dueAt < right.dueAt || (left.dueAt === right.dueAt && left.sequence < right.sequence);
  }

  private push(entry: Entry): void {
    const heap = this.heap;
    heap.push(entry);
    let index = heap.length - 1;
    while (index > 0) {
      const parent = (index - 1) >> 1;
      if (!this.before(heap[index]!, heap[parent]!)) break;
      [heap[index], heap[parent]] = [heap[parent]!, heap[index]!];
      index = parent;
    }
  }

  private pop(): void {
    const heap = this.heap;
    const last = heap.pop()!;
    if (heap.length === 0) return;
    heap[0] = last;
    let index = 0;
    for (;;) {
      const left = index * 2 + 1;
      const right = left + 1;
      let smallest = index;
      if (left < heap.length && this.before(heap[left]!, heap[smallest]!)) smallest = left;
      if (right < heap.length && this.before(heap[right]!, heap[smallest]!)) smallest = right;
      if (smallest === index) break;
      [heap[index], heap[smallest]] = [heap[smallest]!, heap[index]!];
      index = smallest;
    }
  }
}
