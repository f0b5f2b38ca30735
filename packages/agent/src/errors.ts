/** Errors a step handler throws to steer the agent's retry: permanent ones are reported, not retried. */

/** A failure that retrying cannot fix (invalid input, a declined card): reported to the scheduler at once. */
export class PermanentError extends Error {
  override name = 'PermanentError';
  readonly retryable = false;
}

/** True when an error says it must not be retried: a PermanentError or any error with `retryable: false`. */
export function isPermanent(e: unknown): boolean {
  return e instanceof PermanentError || (typeof e === 'object' && e !== null && (e as { retryable?: unknown }).retryable === false);
}
