// Decision 0020 §5.2: a service's "slow down" (429, or 503 with Retry-After) becomes a ThrottledError;
// runStep ends the attempt at once on it, and the agent's breaker does not count it.
import { describe, expect, it } from 'vitest';
import type { StepRequest } from '@triad/protocol';
import { RetryableError, ThrottledError, defineAgent, isThrottled, parseRetryAfter, runStep, stepBreaker, throttledFrom } from '../src/index.js';

const NOW = Date.UTC(2026, 0, 1, 12, 0, 0);

function reply(status: number, retryAfter?: string) {
  return { status, headers: { get: (name: string) => (name.toLowerCase() === 'retry-after' && retryAfter !== undefined ? retryAfter : null) } };
}

function request(over: Partial<StepRequest> = {}): StepRequest {
  const now = Date.now();
  return { taskId: 't1', workflow: 'orders', version: 1, step: 'charge', agent: 'payment', kind: 'run', attempt: 1, idempotencyKey: 'k1', completeBy: now + 10_000, input: {}, needs: {}, retry: { maxAttempts: 5, initialDelayMs: 1, maxDelayMs: 1 }, dispatchedAt: now, ...over };
}

describe('parseRetryAfter', () => {
  it('reads delay-seconds and HTTP dates, a past date as 0, capped at an hour', () => {
    expect(parseRetryAfter('2', NOW)).toBe(2_000);
    expect(parseRetryAfter(' 0 ', NOW)).toBe(0);
    expect(parseRetryAfter(new Date(NOW + 5_000).toUTCString(), NOW)).toBe(5_000);
    expect(parseRetryAfter(new Date(NOW - 5_000).toUTCString(), NOW)).toBe(0);
    expect(parseRetryAfter('86400', NOW)).toBe(3_600_000);
    expect(parseRetryAfter(new Date(NOW + 7_200_000).toUTCString(), NOW)).toBe(3_600_000);
  });

  it('gives undefined for an absent or unreadable value', () => {
    for (const bad of [undefined, null, '', '  ', 'soon', '-3', '1.5', 'Thu, 99 Foo 2026 99:99:99 GMT']) expect(parseRetryAfter(bad, NOW)).toBeUndefined();
  });
});

describe('throttledFrom', () => {
  it('maps a 429 with and without Retry-After, and a 503 only with one', () => {
    const a = throttledFrom(reply(429, '3'), NOW, 'payment');
    expect(a).toBeInstanceOf(ThrottledError);
    expect(a).toMatchObject({ retryable: true, throttled: true, notApplied: true, retryAfterMs: 3_000 });
    expect(a?.message).toBe('payment throttled the call (HTTP 429, Retry-After 3): nothing was applied; the step waits 3000 ms');
    expect(throttledFrom(reply(429), NOW)?.retryAfterMs).toBe(1_000);
    expect(throttledFrom(reply(429, 'garbage'), NOW)?.retryAfterMs).toBe(1_000);
    expect(throttledFrom(reply(503, '7'), NOW)?.retryAfterMs).toBe(7_000);
    expect(throttledFrom(reply(503), NOW)).toBeUndefined();
    expect(throttledFrom(reply(500, '7'), NOW)).toBeUndefined();
    expect(throttledFrom(reply(200), NOW)).toBeUndefined();
    expect(isThrottled(a)).toBe(true);
    expect(isThrottled(new RetryableError('x'))).toBe(false);
  });
});

describe('runStep on a throttle', () => {
  it('ends the attempt at once (no further try in the window) with the Retry-After and effect none', async () => {
    let calls = 0;
    const agent = defineAgent({
      name: 'payment',
      handler: () => {
        calls++;
        throw new ThrottledError('payment is rate limited', 2_000);
      },
    });
    const outcome = await runStep(request(), agent, { safetyMarginMs: 0, random: () => 0 });
    expect(outcome).toEqual({ kind: 'throttled', message: 'payment is rate limited', retryAfterMs: 2_000, tries: 1, effect: 'none' });
    expect(calls).toBe(1);
  });

  it('keeps effect unknown when an earlier try may have applied', async () => {
    let calls = 0;
    const agent = defineAgent({
      name: 'payment',
      handler: () => {
        calls++;
        if (calls === 1) throw new Error('reset by peer');
        throw new ThrottledError('slow down', 500);
      },
    });
    expect(await runStep(request(), agent, { safetyMarginMs: 0, random: () => 0 })).toMatchObject({ kind: 'throttled', retryAfterMs: 500, tries: 2, effect: 'unknown' });
  });

  it('does not open the breaker, which retryable failures do', async () => {
    const breaker = { policy: stepBreaker(60_000, 2), halfOpenAfterMs: 60_000 };
    const throttling = defineAgent({ name: 'payment', handler: () => Promise.reject(new ThrottledError('slow down', 100)) });
    for (let i = 0; i < 5; i++) expect(await runStep(request(), throttling, { safetyMarginMs: 0, breaker })).toMatchObject({ kind: 'throttled' });
    const failing = defineAgent({ name: 'payment', handler: () => Promise.reject(new Error('down')) });
    expect(await runStep(request({ retry: { maxAttempts: 2, initialDelayMs: 1, maxDelayMs: 1 } }), failing, { safetyMarginMs: 0, breaker, random: () => 0 })).toMatchObject({ kind: 'failed', tries: 2 });
    expect(await runStep(request(), throttling, { safetyMarginMs: 0, breaker })).toEqual({ kind: 'circuit_open', retryAfterMs: 60_000, tries: 0 });
  });
});
