/**
 * Schedule ticks (decision 0019 §6): when a schedule fires, computed the same way by every supervisor
 * wherever it runs. `every` ticks are `anchor + k·every` (k ≥ 1); cron ticks come from croner (decision
 * 0019 §6.4: no dependency, ESM with types, Vixie cron's DST rules), in a time zone that defaults to UTC.
 * The one module that names the cron library. Pure: no I/O, no clock of its own.
 */
import { Cron } from 'croner';

export const MIN_EVERY_MS = 1_000;
export const MAX_EVERY_MS = 30 * 86_400_000;
/** At most this many due ticks fire at once (a catch-up after a short failover). */
export const MAX_TICKS_AT_ONCE = 10;
/** A cron schedule's ticks are walked one by one up to this many; beyond it only the latest counts. */
const MAX_WALK = 1_000;

const UNITS: Record<string, number> = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/**
 * `--every`: `500ms 10s 5m 2h 1d` (a whole number and a unit) or a number of milliseconds; at least 1 s,
 * at most 30 days. Throws an Error that says what was wrong and what is accepted.
 */
export function parseEvery(value: string | number): number {
  let ms: number;
  if (typeof value === 'number') ms = value;
  else {
    const m = /^\s*(\d+)\s*(ms|s|m|h|d)\s*$/.exec(value);
    if (!m) throw new Error(`every "${value}" is not a duration: use a whole number and a unit (ms, s, m, h, d), e.g. 10s, 5m, 2h`);
    ms = Number(m[1]) * (UNITS[m[2] ?? 'ms'] ?? 1);
  }
  if (!Number.isInteger(ms) || ms < MIN_EVERY_MS || ms > MAX_EVERY_MS) {
    throw new Error(`every ${typeof value === 'number' ? `${value} ms` : `"${value}"`} is out of range: a schedule fires at most once a second and at least once every 30 days`);
  }
  return ms;
}

export interface ScheduleTiming {
  /** Interval in ms (exclusive with cron). */
  every?: number;
  /** A 5-field cron pattern (6 with seconds), exclusive with every. */
  cron?: string;
  /** IANA time zone of the cron pattern (default UTC). */
  timezone?: string;
  /** When the schedule was created: `every` ticks count from it. */
  anchor: number;
}

function cronOf(pattern: string, timezone: string | undefined): Cron {
  return new Cron(pattern, { timezone: timezone ?? 'UTC', paused: true, mode: '5-or-6-parts', domAndDow: false });
}

/** What is wrong with a cron pattern and time zone (empty when nothing): each problem says what to do. */
export function cronProblems(pattern: string, timezone?: string): string[] {
  try {
    const c = cronOf(pattern, timezone);
    if (!c.nextRun(new Date(0))) return [`cron "${pattern}" never fires: check its fields (minute hour day-of-month month day-of-week)`];
    return [];
  } catch (e) {
    const why = e instanceof Error ? e.message : String(e);
    if (timezone !== undefined && /time ?zone|Invalid time zone|RangeError/i.test(why)) return [`time zone "${timezone}" is not an IANA time zone (e.g. Europe/Paris, America/New_York, UTC)`];
    return [`cron "${pattern}" is not valid (${why}): use 5 fields (minute hour day-of-month month day-of-week) or 6 with seconds first, e.g. "0 2 * * *"`];
  }
}

/** The first tick strictly after `after` (epoch ms), or undefined when the pattern never fires again. */
export function nextTick(t: ScheduleTiming, after: number): number | undefined {
  if (t.every !== undefined) {
    const k = Math.max(1, Math.floor((after - t.anchor) / t.every) + 1);
    return t.anchor + k * t.every;
  }
  if (t.cron === undefined) throw new Error('a schedule needs every or cron');
  const next = cronOf(t.cron, t.timezone).nextRun(new Date(after));
  return next ? next.getTime() : undefined;
}

export interface DueTicks {
  /** The ticks to fire now, oldest first. */
  fire: number[];
  /** Due ticks that will never fire (older than the catch-up window: an outage). */
  missed: number;
  /** The first tick after `now`. */
  next: number | undefined;
}

/**
 * The ticks due after `lastTick` (or the anchor) up to `now` (decision 0019 §6.3). When every one is at
 * most `catchUpMs` old (a leader failover) none is lost: the oldest MAX_TICKS_AT_ONCE fire now, oldest
 * first, and the rest at the next call (their `lastTick` is then later). When any is older (an outage)
 * only the latest fires — one task, not a burst — and the others are missed.
 */
export function dueTicks(t: ScheduleTiming, lastTick: number | undefined, now: number, catchUpMs: number): DueTicks {
  const from = lastTick ?? t.anchor;
  const next = nextTick(t, now);
  let oldest: number | undefined;
  let latest: number | undefined;
  let count = 0;
  const firstTen: number[] = [];
  if (t.every !== undefined) {
    const first = Math.max(1, Math.floor((from - t.anchor) / t.every) + 1);
    const last = Math.floor((now - t.anchor) / t.every);
    count = Math.max(0, last - first + 1);
    if (count > 0) {
      oldest = t.anchor + first * t.every;
      latest = t.anchor + last * t.every;
      for (let k = first; k <= Math.min(last, first + MAX_TICKS_AT_ONCE - 1); k++) firstTen.push(t.anchor + k * t.every);
    }
  } else {
    let cursor = from;
    for (;;) {
      const n = nextTick(t, cursor);
      if (n === undefined || n > now) break;
      count++;
      oldest ??= n;
      latest = n;
      if (firstTen.length < MAX_TICKS_AT_ONCE) firstTen.push(n);
      if (count >= MAX_WALK) {
        // A long outage of a frequent pattern: the latest tick is the one that fires.
        const prev = cronOf(t.cron ?? '', t.timezone).previousRuns(1, new Date(now + 1))[0];
        if (prev) latest = prev.getTime();
        break;
      }
      cursor = n;
    }
  }
  if (count === 0 || oldest === undefined || latest === undefined) return { fire: [], missed: 0, next };
  if (now - oldest > catchUpMs) return { fire: [latest], missed: Math.max(0, count - 1), next };
  return { fire: firstTen, missed: 0, next };
}
