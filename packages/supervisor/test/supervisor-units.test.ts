// The supervisor's own pure logic: when it sweeps next, and its settings (every default in one schema).
import { describe, expect, it } from 'vitest';
import { DEFAULT_SUPERVISION } from '@triad/core';
import { ErrorCode } from '@triad/protocol';
import { MIN_SWEEP_GAP_MS, SUPERVISOR_DEFAULTS, catchUpWindowMs, countNotice, countTick, resolveSupervisorSettings, sweepDelay, type NoticeInput, type TickInput, type TickOutcome } from '../src/index.js';
import type { SupervisorMetrics } from '../src/telemetry.js';
import type { Expiry } from '@triad/store';

describe('sweepDelay', () => {
  const base = { leading: true, behind: false, now: 10_000, intervalMs: 1_000 };

  it('a follower ticks once per interval; a leader behind sweeps again at once', () => {
    expect(sweepDelay({ ...base, leading: false, nextDeadline: 10_001 })).toBe(1_000);
    expect(sweepDelay({ ...base, behind: true, nextDeadline: 50_000 })).toBe(MIN_SWEEP_GAP_MS);
  });

  it('a leader sleeps until just after the earliest deadline, within [MIN_SWEEP_GAP_MS, interval]', () => {
    expect(sweepDelay({ ...base, nextDeadline: 10_300 })).toBe(301);
    expect(sweepDelay({ ...base, nextDeadline: 10_000 })).toBe(MIN_SWEEP_GAP_MS);
    expect(sweepDelay({ ...base, nextDeadline: 5_000 })).toBe(MIN_SWEEP_GAP_MS);
    expect(sweepDelay({ ...base, nextDeadline: 60_000 })).toBe(1_000);
    expect(sweepDelay({ ...base, nextDeadline: undefined })).toBe(1_000);
  });
});

describe('supervisor settings', () => {
  it('fills every default from one schema (interval and lease are the bounds calculator`s defaults too)', () => {
    expect(SUPERVISOR_DEFAULTS).toEqual({
      intervalMs: DEFAULT_SUPERVISION.sweepIntervalMs,
      leaseMs: DEFAULT_SUPERVISION.leaderLeaseMs,
      batchSize: 500,
      retentionMs: 86_400_000,
      compactAfterMs: 600_000,
      waitReplicas: 0,
      // The object GC looks at an object only once it is 15 minutes old (decision 0021 §4.6).
      objectGcGraceMs: 900_000,
    });
    expect(resolveSupervisorSettings({ intervalMs: 100, compactAfterMs: 0 })).toEqual({ ...SUPERVISOR_DEFAULTS, intervalMs: 100, compactAfterMs: 0 });
  });

  it('refuses what cannot work, naming each setting (by the caller`s label)', () => {
    expect(() => resolveSupervisorSettings({ leaseMs: 50, intervalMs: 1.5 }, (f, p) => `the ${f} option: ${p}`)).toThrow(
      expect.objectContaining({ code: ErrorCode.InvalidConfig, details: [expect.stringMatching(/^the intervalMs option: /), expect.stringMatching(/^the leaseMs option: .*200/)] }),
    );
  });
});

describe('schedule ticks', () => {
  it('the catch-up window is at least a minute, and covers two leases and two intervals (decision 0019 §6.3)', () => {
    expect(catchUpWindowMs({ leaseMs: 1_500, intervalMs: 200 })).toBe(60_000);
    expect(catchUpWindowMs({ leaseMs: 40_000, intervalMs: 5_000 })).toBe(90_000);
  });

  it('triad_schedule_ticks_total counts fired and skipped ticks and the missed ones a fire recorded, never a noop', async () => {
    const counted: [string, number][] = [];
    const m = { scheduleTicks: (action: string, n: number) => counted.push([action, n]) } as unknown as SupervisorMetrics;
    const interceptor = countTick(m);
    const input = {} as TickInput;
    const run = (o: TickOutcome) => interceptor(input, () => Promise.resolve(o));
    await run({ action: 'fired', missed: 0 });
    await run({ action: 'skipped', missed: 0 });
    await run({ action: 'fired', missed: 7 });
    await run({ action: 'noop', missed: 3 });
    expect(counted).toEqual([['fired', 1], ['skipped', 1], ['fired', 1], ['missed', 7]]);
  });
});

describe('child notices', () => {
  it('triad_child_notices_total counts each delivered notice by the child\'s end and the parent step\'s action, nothing when none was taken', async () => {
    const counted: [string, string][] = [];
    const interceptor = countNotice({ childNotices: (status: string, action: string) => counted.push([status, action]) });
    const input: NoticeInput = { childId: 'p1:ship:1', now: 1, epoch: 1 };
    const delivered = (childStatus: string, action: string) => ({ parentId: 'p1', step: 'ship', childId: 'p1:ship:1', childStatus, expiry: { action } as Expiry });
    await interceptor(input, () => Promise.resolve(delivered('completed', 'done')));
    await interceptor(input, () => Promise.resolve(delivered('failed', 'compensate')));
    await interceptor(input, () => Promise.resolve(undefined));
    expect(counted).toEqual([['completed', 'done'], ['failed', 'compensate']]);
  });
});
