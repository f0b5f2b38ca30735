/** Bounded waits for the child-process code: a timeout error of its own, sleep, and a timeout around a promise. */

/**
 * A bounded wait ran out (a line of output, an exit after a signal): "too slow", as opposed to "broke".
 * The test harness exports it as HarnessTimeoutError and throws it from its own waits too.
 */
export class WaitTimeoutError extends Error {
  override readonly name = 'WaitTimeoutError';

  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
  }
}

/** Resolves after `ms`; the timer is unref'd so a pending sleep never keeps the process alive. */
export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms).unref());
}

/**
 * Resolves or rejects like `promise`, or rejects with `onTimeout()` after `ms`.
 * The timer is cleared either way, so finished waits leave nothing behind.
 */
export function withTimeout<T>(promise: Promise<T>, ms: number, onTimeout: () => Error): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => reject(onTimeout()), ms);
    promise.then(
      (value) => {
        clearTimeout(timer);
        resolve(value);
      },
      (error: unknown) => {
        clearTimeout(timer);
        reject(error instanceof Error ? error : new Error(String(error)));
      },
    );
  });
}

/** Message of any thrown value, for composing error texts without losing non-Error throws. */
export function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
