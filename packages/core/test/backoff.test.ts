// Proves full-jitter back-off: delay is uniform in [0, min(maxDelay, initial * 2^(retry-1))), driven by an injected random.
import { describe, expect, it } from 'vitest';
import { DEFAULT_RETRY, fullJitterDelay } from '../src/index.js';

const ALMOST_ONE = 1 - Number.EPSILON;
const policy = { initialDelayMs: 100, maxDelayMs: 5_000 };

/** A small deterministic PRNG (mulberry32), so the property checks are reproducible. */
function seeded(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}

describe('fullJitterDelay', () => {
  it('random() = 0 gives 0 at every retry', () => {
    for (let retry = 1; retry <= 20; retry++) expect(fullJitterDelay(policy, retry, () => 0)).toBe(0);
  });

  it('random() just under 1 gives just under the ceiling, which doubles from initialDelayMs', () => {
    expect(fullJitterDelay(policy, 1, () => ALMOST_ONE)).toBe(99);
    expect(fullJitterDelay(policy, 2, () => ALMOST_ONE)).toBe(199);
    expect(fullJitterDelay(policy, 3, () => ALMOST_ONE)).toBe(399);
    for (let retry = 1; retry <= 6; retry++) {
      const ceiling = 100 * 2 ** (retry - 1);
      const d = fullJitterDelay(policy, retry, () => ALMOST_ONE);
      expect(d).toBeLessThan(ceiling);
      expect(d).toBeGreaterThanOrEqual(ceiling - 1);
    }
  });

  it('the ceiling is capped at maxDelayMs, however many retries', () => {
    // 100 * 2^5 = 3200 < 5000; 100 * 2^6 = 6400 is capped.
    expect(fullJitterDelay(policy, 6, () => ALMOST_ONE)).toBe(3_199);
    expect(fullJitterDelay(policy, 7, () => ALMOST_ONE)).toBe(4_999);
    expect(fullJitterDelay(policy, 60, () => ALMOST_ONE)).toBe(4_999);
    expect(fullJitterDelay(policy, 2_000, () => ALMOST_ONE)).toBe(4_999);
    expect(fullJitterDelay({ initialDelayMs: 1_000, maxDelayMs: 1_000 }, 1, () => ALMOST_ONE)).toBe(999);
  });

  it('half of the ceiling for random() = 0.5 (uniform scaling)', () => {
    expect(fullJitterDelay(policy, 1, () => 0.5)).toBe(50);
    expect(fullJitterDelay(policy, 4, () => 0.5)).toBe(400);
    expect(fullJitterDelay(policy, 10, () => 0.5)).toBe(2_500);
  });

  it('retry 0 (or below) is treated as the first retry', () => {
    expect(fullJitterDelay(policy, 0, () => ALMOST_ONE)).toBe(99);
    expect(fullJitterDelay(policy, -3, () => ALMOST_ONE)).toBe(99);
  });

  it('is always a whole number in [0, ceiling) for any random in [0, 1)', () => {
    const random = seeded(42);
    for (let retry = 1; retry <= 12; retry++) {
      const ceiling = Math.min(policy.maxDelayMs, policy.initialDelayMs * 2 ** (retry - 1));
      for (let i = 0; i < 200; i++) {
        const d = fullJitterDelay(policy, retry, random);
        expect(Number.isInteger(d)).toBe(true);
        expect(d).toBeGreaterThanOrEqual(0);
        expect(d).toBeLessThan(ceiling);
      }
    }
  });

  it('uses Math.random by default and DEFAULT_RETRY is 3 tries, 100 ms up to 5 s', () => {
    expect(DEFAULT_RETRY).toEqual({ maxAttempts: 3, initialDelayMs: 100, maxDelayMs: 5_000 });
    const d = fullJitterDelay(DEFAULT_RETRY, 3);
    expect(d).toBeGreaterThanOrEqual(0);
    expect(d).toBeLessThan(400);
  });
});
