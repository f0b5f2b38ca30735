// Schedule ticks (decision 0019 §6.3/§6.4): every-ticks count from the anchor, cron ticks come from croner
// in a time zone (UTC by default) with Vixie cron's DST rules; a failover's backlog fires whole (at most 10
// at a time, none lost), an outage's only its latest tick.
import { describe, expect, it } from 'vitest';
import { MAX_TICKS_AT_ONCE, cronProblems, dueTicks, nextTick, parseEvery } from '../src/index.js';

const T0 = Date.UTC(2026, 10, 26, 12, 0, 0);

describe('parseEvery', () => {
  it('reads a whole number and a unit, or milliseconds', () => {
    expect(parseEvery('10s')).toBe(10_000);
    expect(parseEvery('5m')).toBe(300_000);
    expect(parseEvery('2h')).toBe(7_200_000);
    expect(parseEvery('1d')).toBe(86_400_000);
    expect(parseEvery('1500ms')).toBe(1_500);
    expect(parseEvery(2_000)).toBe(2_000);
  });
  it('refuses what is not a duration, or fires more than once a second or less than once in 30 days, saying so', () => {
    expect(() => parseEvery('10')).toThrow('every "10" is not a duration: use a whole number and a unit (ms, s, m, h, d), e.g. 10s, 5m, 2h');
    expect(() => parseEvery('1.5s')).toThrow(/is not a duration/);
    expect(() => parseEvery('500ms')).toThrow('every "500ms" is out of range: a schedule fires at most once a second and at least once every 30 days');
    expect(() => parseEvery('31d')).toThrow(/out of range/);
    expect(() => parseEvery(999)).toThrow('every 999 ms is out of range');
  });
});

describe('cronProblems', () => {
  it('accepts 5 fields, or 6 with seconds, in a time zone', () => {
    expect(cronProblems('0 2 * * *')).toEqual([]);
    expect(cronProblems('*/10 * * * * *')).toEqual([]);
    expect(cronProblems('30 2 * * *', 'Europe/Berlin')).toEqual([]);
  });
  it('says what is wrong with a pattern or a time zone', () => {
    expect(cronProblems('0 25 * * *')[0]).toMatch(/^cron "0 25 \* \* \*" is not valid \(.+\): use 5 fields/);
    expect(cronProblems('0 2 * *')[0]).toMatch(/^cron "0 2 \* \*" is not valid/);
    expect(cronProblems('0 2 * * *', 'Mars/Olympus')).toEqual(['time zone "Mars/Olympus" is not an IANA time zone (e.g. Europe/Paris, America/New_York, UTC)']);
  });
});

describe('nextTick', () => {
  it('every: anchor + k·every, strictly after the time given', () => {
    const t = { every: 2_000, anchor: T0 };
    expect(nextTick(t, T0)).toBe(T0 + 2_000);
    expect(nextTick(t, T0 + 1_999)).toBe(T0 + 2_000);
    expect(nextTick(t, T0 + 2_000)).toBe(T0 + 4_000);
    expect(nextTick(t, T0 - 50_000)).toBe(T0 + 2_000);
  });
  it('cron: in UTC unless a time zone is named', () => {
    expect(nextTick({ cron: '0 2 * * *', anchor: T0 }, T0)).toBe(Date.UTC(2026, 10, 27, 2, 0, 0));
    // 02:00 in Paris is 01:00 UTC in November (CET, UTC+1).
    expect(nextTick({ cron: '0 2 * * *', timezone: 'Europe/Paris', anchor: T0 }, T0)).toBe(Date.UTC(2026, 10, 27, 1, 0, 0));
  });
  it("cron across DST (Vixie cron's rules): a time the spring-forward skips fires at the first valid time after it, one the fall-back repeats fires once", () => {
    // 2026-03-29: Berlin skips 02:00–03:00. 02:30 fires at 03:00 CEST = 01:00 UTC.
    const spring = nextTick({ cron: '30 2 * * *', timezone: 'Europe/Berlin', anchor: 0 }, Date.UTC(2026, 2, 28, 12, 0, 0));
    expect(spring).toBe(Date.UTC(2026, 2, 29, 1, 0, 0));
    // 2026-10-25: Berlin repeats 02:00–03:00. 02:30 fires once (the first, CEST, 00:30 UTC); the next is a day later.
    const fall = nextTick({ cron: '30 2 * * *', timezone: 'Europe/Berlin', anchor: 0 }, Date.UTC(2026, 9, 24, 12, 0, 0));
    expect(fall).toBe(Date.UTC(2026, 9, 25, 0, 30, 0));
    expect(nextTick({ cron: '30 2 * * *', timezone: 'Europe/Berlin', anchor: 0 }, fall!)).toBe(Date.UTC(2026, 9, 26, 1, 30, 0));
  });
});

describe('dueTicks', () => {
  const every = { every: 2_000, anchor: T0 };
  const CATCH_UP = 60_000;

  it('nothing before the first tick; each tick once after the last one fired', () => {
    expect(dueTicks(every, undefined, T0 + 1_999, CATCH_UP)).toEqual({ fire: [], missed: 0, next: T0 + 2_000 });
    expect(dueTicks(every, undefined, T0 + 2_000, CATCH_UP)).toEqual({ fire: [T0 + 2_000], missed: 0, next: T0 + 4_000 });
    expect(dueTicks(every, T0 + 2_000, T0 + 3_000, CATCH_UP)).toEqual({ fire: [], missed: 0, next: T0 + 4_000 });
  });

  it('a failover (ticks within the catch-up window): every due tick fires, oldest first, at most 10 at a time, none lost', () => {
    // The leader died at +5 s, a new one sweeps at +31 s: ticks +6 … +30 (13 of them) are due.
    const a = dueTicks(every, T0 + 4_000, T0 + 31_000, CATCH_UP);
    expect(a.fire).toEqual(Array.from({ length: MAX_TICKS_AT_ONCE }, (_, i) => T0 + 6_000 + i * 2_000));
    expect(a.missed).toBe(0);
    const b = dueTicks(every, a.fire[a.fire.length - 1], T0 + 31_000, CATCH_UP);
    expect(b.fire).toEqual([T0 + 26_000, T0 + 28_000, T0 + 30_000]);
    expect(b.missed).toBe(0);
  });

  it('an outage (a due tick older than the window): only the latest fires, the others are missed', () => {
    const r = dueTicks(every, T0 + 4_000, T0 + 3_600_000 + 500, CATCH_UP);
    expect(r.fire).toEqual([T0 + 3_600_000]);
    expect(r.missed).toBe((3_600_000 - 6_000) / 2_000);
    expect(r.next).toBe(T0 + 3_602_000);
  });

  it('cron: the same rules over the pattern\'s ticks, the latest found after a long outage of a frequent one', () => {
    const minutely = { cron: '* * * * *', anchor: T0 };
    expect(dueTicks(minutely, T0, T0 + 150_000, CATCH_UP * 3)).toEqual({ fire: [T0 + 60_000, T0 + 120_000], missed: 0, next: T0 + 180_000 });
    const outage = dueTicks({ cron: '* * * * * *', anchor: T0 }, T0, T0 + 7_200_500, CATCH_UP);
    expect(outage.fire).toEqual([T0 + 7_200_000]);
    expect(outage.missed).toBeGreaterThan(0);
  });
});
