// Bounded waiting: polling a condition with a deadline, and sleeping without holding the process open.
import { sleep, withTimeout } from '@triad/launcher';
import { HarnessTimeoutError, messageOf } from './errors.js';

/** The launcher's (its child-process code needs it too), exported with waitFor for the tests. */
export { sleep };

export interface WaitForOptions {
  /** Upper bound for the whole wait, including a call of `fn` that never settles. */
  timeoutMs: number;
  /** Pause between attempts; default 50 ms. */
  intervalMs?: number;
  /** Completes the timeout message: `timed out after Nms waiting for <what>`. */
  what: string;
  /** What the awaited state last looked like, appended to the timeout message (`; last seen: …`). */
  lastSeen?: () => string;
}

/**
 * Calls `fn` until it returns something other than `undefined` or `false`, and resolves with it.
 * A throw counts as "not yet" and is reported with the timeout, so a probe that keeps failing says why.
 */
export async function waitFor<T>(
  fn: () => Promise<T | undefined | false> | T | undefined | false,
  opts: WaitForOptions,
): Promise<T> {
  const intervalMs = opts.intervalMs ?? 50;
  const deadline = Date.now() + opts.timeoutMs;
  let lastError: unknown;
  let attempts = 0;
  while (attempts === 0 || Date.now() < deadline) {
    attempts += 1;
    try {
      // Bounded too: a call that never settles must not outlive the deadline.
      const remaining = Math.max(0, deadline - Date.now());
      const value = await withTimeout(Promise.resolve().then(fn), remaining, () => new DeadlineReached());
      if (value !== undefined && value !== false) return value;
    } catch (error) {
      if (error instanceof DeadlineReached) break;
      lastError = error;
    }
    const remaining = deadline - Date.now();
    if (remaining <= 0) break;
    await sleep(Math.min(intervalMs, remaining));
  }
  const suffix = lastError === undefined ? '' : ` (last error: ${messageOf(lastError)})`;
  const seen = opts.lastSeen ? `; last seen: ${describeSafely(opts.lastSeen)}` : '';
  throw new HarnessTimeoutError(`timed out after ${opts.timeoutMs}ms waiting for ${opts.what}${seen}${suffix}`, {
    cause: lastError,
  });
}

/** The timeout message must not be lost to a describer that throws. */
function describeSafely(lastSeen: () => string): string {
  try {
    return lastSeen();
  } catch (error) {
    return `(not describable: ${messageOf(error)})`;
  }
}

/** Internal marker: the attempt in flight was cut off by the overall deadline. */
class DeadlineReached extends Error {}
