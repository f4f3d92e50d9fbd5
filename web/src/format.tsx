/** How times, durations and statuses read on the page. */

export function time(iso: string | null | undefined): string {
  if (!iso) return "–";
  const date = new Date(iso);
  const today = new Date().toDateString() === date.toDateString();
  return today ? date.toLocaleTimeString() : date.toLocaleString();
}

export function duration(ms: number | null | undefined): string {
  if (ms === null || ms === undefined || ms < 0) return "–";
  if (ms < 1_000) return `${ms} ms`;
  const seconds = ms / 1_000;
  if (seconds < 90) return `${seconds.toFixed(seconds < 10 ? 1 : 0)} s`;
  const minutes = Math.floor(seconds / 60);
  return `${minutes} min ${Math.round(seconds % 60)} s`;
}

/** From `start` to `end` (or to now, while it runs). */
export function elapsed(start: string | null | undefined, end: string | null | undefined): string {
  if (!start) return "–";
  return duration((end ? Date.parse(end) : Date.now()) - Date.parse(start));
}

export function StatusBadge(props: { status: string }) {
  return (
    <span class="badge" data-status={props.status}>
      {props.status}
    </span>
  );
}
