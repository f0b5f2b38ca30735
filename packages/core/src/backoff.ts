/** Retry maths: exponential back-off with full jitter, bounded by a deadline. Pure; randomness is injected. */
import type { RetryPolicy } from '@triad/protocol';

/** Delay before retry number `retry` (1 = the first retry): uniform in [0, min(max, initial * 2^(retry-1))]. */
export function fullJitterDelay(policy: Pick<RetryPolicy, 'initialDelayMs' | 'maxDelayMs'>, retry: number, random: () => number = Math.random): number {
  const ceiling = Math.min(policy.maxDelayMs, policy.initialDelayMs * 2 ** Math.max(0, retry - 1));
  return Math.floor(random() * ceiling);
}

export const DEFAULT_RETRY: RetryPolicy = { maxAttempts: 3, initialDelayMs: 100, maxDelayMs: 5_000 };
