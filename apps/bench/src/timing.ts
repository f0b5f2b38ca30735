/** Small timing helpers: sleeps, bounded waits that fail with a message, and percentiles. */
import { withTimeout as boundedWait } from '@triad/launcher';

export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/** Rejects with `what` once `ms` have passed, so no wait in the benchmark is unbounded (@triad/launcher's withTimeout). */
export function withTimeout<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  return boundedWait(p, ms, () => new Error(`${what}: not done within ${ms} ms`));
}

/** Nearest-rank percentile (p in 0..100) of unsorted values; NaN when there are none. */
export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const rank = Math.min(sorted.length, Math.max(1, Math.ceil((p / 100) * sorted.length)));
  return sorted[rank - 1] ?? NaN;
}

export function median(values: readonly number[]): number {
  return percentile(values, 50);
}

export function round(v: number, digits = 2): number {
  const f = 10 ** digits;
  return Math.round(v * f) / f;
}
