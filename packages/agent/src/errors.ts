/** Errors a step handler throws to steer the agent's retry: permanent ones are reported, not retried. */
import { MAX_THROTTLE_RETRY_AFTER_MS } from '@triad/protocol';

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
export abstract class StepFailure extends Error {
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

/**
 * The service refused the call and asked for time (HTTP 429, or 503 with Retry-After; decision 0020 §5):
 * the attempt ends at once, without another try, and is reported `throttled` with `retryAfterMs` — the
 * scheduler puts the step back until then without counting a failure. Nothing was applied by the refused
 * call (`notApplied` defaults to true). Build one from a fetch Response with `throttledFrom`.
 */
export class ThrottledError extends StepFailure {
  override name = 'ThrottledError';
  readonly retryable = true;
  readonly throttled = true;
  /** How long the service asked to wait, ms (0 – 1 h). */
  readonly retryAfterMs: number;

  constructor(message: string, retryAfterMs: number, options: StepErrorOptions = {}) {
    super(message, { notApplied: true, ...options });
    this.retryAfterMs = Math.max(0, Math.min(Math.round(retryAfterMs), MAX_THROTTLE_RETRY_AFTER_MS));
  }
}

/** True for a ThrottledError, or any error with `throttled: true` (kept by the breaker from opening). */
export function isThrottled(e: unknown): boolean {
  return e instanceof ThrottledError || (typeof e === 'object' && e !== null && (e as { throttled?: unknown }).throttled === true);
}
