/** Errors a step handler throws to steer the agent's retry: permanent ones are reported, not retried. */

export interface StepErrorOptions {
  cause?: unknown;
  /**
   * The remote effect certainly did not happen in this try: the service refused before doing anything,
   * or was never reached (connection refused). When every try of an attempt fails like this, the step's
   * effect stays "none" and an undo of the task skips it (decision 0009). Leave it unset when unsure:
   * "unknown" is the safe default.
   */
  notApplied?: boolean;
}

/** A failure a handler reports on purpose; `notApplied` says its try certainly took no effect. */
abstract class StepFailure extends Error {
  abstract readonly retryable: boolean;
  readonly notApplied: boolean;

  constructor(message: string, options: StepErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.notApplied = options.notApplied === true;
  }
}

/** A failure that retrying cannot fix (invalid input, a declined card): reported to the scheduler at once. */
export class PermanentError extends StepFailure {
  override name = 'PermanentError';
  readonly retryable = false;
}

/** A failure worth retrying (any plain Error is one too); use it to say the effect was not applied. */
export class RetryableError extends StepFailure {
  override name = 'RetryableError';
  readonly retryable = true;
}

/** True when an error says it must not be retried: a PermanentError or any error with `retryable: false`. */
export function isPermanent(e: unknown): boolean {
  return e instanceof PermanentError || (typeof e === 'object' && e !== null && (e as { retryable?: unknown }).retryable === false);
}

/** True when an error says its try certainly did not apply the remote effect (`notApplied: true`). */
export function isNotApplied(e: unknown): boolean {
  return typeof e === 'object' && e !== null && (e as { notApplied?: unknown }).notApplied === true;
}
