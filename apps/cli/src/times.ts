/** Times for humans, shared by format.ts and waiting.ts (and the dashboard's bundle): pure, no I/O. */

export const pad2 = (n: number): string => String(n).padStart(2, '0');

/** Local wall-clock time with milliseconds: "HH:MM:SS.mmm". */
export function clock(ms: number): string {
  const d = new Date(ms);
  return `${pad2(d.getHours())}:${pad2(d.getMinutes())}:${pad2(d.getSeconds())}.${String(d.getMilliseconds()).padStart(3, '0')}`;
}

/**
 * A duration for humans: "420ms", "4.2s", "3m12s", "2h05m", "3d4h". Negative durations are shown by
 * their size (callers say "ago" or "in").
 */
export function duration(ms: number): string {
  const a = Math.abs(ms);
  if (a < 1_000) return `${Math.round(a)}ms`;
  if (a < 60_000) return `${(Math.floor(a / 100) / 10).toFixed(1)}s`;
  const s = Math.floor(a / 1_000);
  if (a < 3_600_000) return `${Math.floor(s / 60)}m${pad2(s % 60)}s`;
  const m = Math.floor(s / 60);
  if (a < 86_400_000) return `${Math.floor(m / 60)}h${pad2(m % 60)}m`;
  const h = Math.floor(m / 60);
  return `${Math.floor(h / 24)}d${h % 24}h`;
}

/** A time relative to now: "in 4.2s" for the future, "3.1s ago" for the past, "now" within 50 ms. */
export function relative(ms: number, now: number = Date.now()): string {
  const d = ms - now;
  if (Math.abs(d) < 50) return 'now';
  return d > 0 ? `in ${duration(d)}` : `${duration(d)} ago`;
}

