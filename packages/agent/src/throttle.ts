/**
 * Mapping an HTTP refusal to a throttle (decision 0020 §5.2): the host makes no HTTP call itself —
 * handlers do — so these are what a handler uses. No library: two forms of one header and a cap.
 */
import { DEFAULT_THROTTLE_RETRY_AFTER_MS, MAX_THROTTLE_RETRY_AFTER_MS } from '@triad/protocol';
import { ThrottledError } from './errors.js';

/**
 * A `Retry-After` value (RFC 9110 §10.2.3) as ms from `now`: `delay-seconds` (digits) or an HTTP-date;
 * a date in the past is 0; at most an hour. `undefined` for anything else (absent, empty, garbage).
 */
export function parseRetryAfter(value: string | null | undefined, now: number = Date.now()): number | undefined {
  if (value === null || value === undefined) return undefined;
  const v = value.trim();
  if (v === '') return undefined;
  let ms: number;
  if (/^\d+$/.test(v)) ms = Number(v) * 1000;
  else {
    // An HTTP-date names a weekday or a month in letters; Date.parse alone would also take "1.5" or "2024".
    if (!/[A-Za-z]/.test(v)) return undefined;
    const at = Date.parse(v);
    if (Number.isNaN(at)) return undefined;
    ms = at - now;
  }
  return Math.min(Math.max(0, ms), MAX_THROTTLE_RETRY_AFTER_MS);
}

/** The part of a fetch Response (or any HTTP client's reply) a throttle is read from. */
export interface HttpReply {
  status: number;
  headers: { get(name: string): string | null };
}

/**
 * A ThrottledError for a reply that throttles: a 429 (1 s when it has no usable Retry-After), or a 503
 * **with** a Retry-After (a 503 without one is plain unavailability: an ordinary retryable failure).
 * Anything else `undefined`. Check it before treating 4xx as permanent.
 */
export function throttledFrom(res: HttpReply, now: number = Date.now(), what = 'the service'): ThrottledError | undefined {
  if (res.status !== 429 && res.status !== 503) return undefined;
  const header = res.headers.get('retry-after');
  const after = parseRetryAfter(header, now);
  if (res.status === 503 && after === undefined) return undefined;
  const ms = after ?? DEFAULT_THROTTLE_RETRY_AFTER_MS;
  const said = header === null ? 'no Retry-After' : `Retry-After ${header.trim()}`;
  return new ThrottledError(`${what} throttled the call (HTTP ${res.status}, ${said}): nothing was applied; the step waits ${ms} ms`, ms);
}
