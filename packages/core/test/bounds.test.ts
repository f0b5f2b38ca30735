import { describe, expect, it } from 'vitest';
import { LadderSchema } from '@triad/protocol';
import { boundMs, formatBound, ladderDecisions, ladderWorstCaseMs, phaseBound, taskBound, validateDefinition } from '../src/index.js';

const ladder = (l: Partial<{ retries: number; longBackoffMs: number; maxFailures: number; maxCircuitOpen: number }>) => LadderSchema.parse(l);

describe('phase bounds', () => {
  it('counts every attempt (counted failures and circuit-open ones) at its budget and every park at the long back-off', () => {
    // r=1, m=3: failure 1 → retry, 2 → park, 3 → give up: 3 attempts, 1 long park; c=2 circuit attempts and parks.
    const l = ladder({ retries: 1, longBackoffMs: 200, maxFailures: 3, maxCircuitOpen: 2 });
    expect(ladderWorstCaseMs(800, l)).toBe((3 + 2) * 800 + (1 + 2) * 200);
    expect(ladderDecisions(l)).toBe(3 + 1 + 2);
    // No long park when every counted failure below maxFailures is an immediate retry.
    expect(ladderWorstCaseMs(100, ladder({ retries: 5, longBackoffMs: 1_000, maxFailures: 3, maxCircuitOpen: 0 }))).toBe(300);
  });

  it('a phase ends by its give-up time (by default the ladder worst case) plus one budget', () => {
    const l = ladder({ retries: 3, longBackoffMs: 30_000, maxFailures: 6, maxCircuitOpen: 10 });
    expect(phaseBound(1_000, l, undefined).fixedMs).toBe(ladderWorstCaseMs(1_000, l) + 1_000);
    expect(phaseBound(1_000, l, 5_000)).toEqual({ fixedMs: 6_000, sweeps: ladderDecisions(l) });
  });
});

describe('task bounds', () => {
  const def = validateDefinition({
    name: 'orders',
    onFailure: 'compensate',
    defaults: { ladder: { retries: 1, longBackoffMs: 100, maxFailures: 2, maxCircuitOpen: 0 } },
    steps: [
      { name: 'a', agent: 'x', budgetMs: 1_000, compensate: { agent: 'x', budgetMs: 50 } },
      { name: 'b', agent: 'x', budgetMs: 3_000 },
      { name: 'c', agent: 'x', budgetMs: 500, dependsOn: ['a', 'b'], compensate: { agent: 'x', budgetMs: 70 } },
    ],
  });

  it('runs the longest dependency path, drains the longest budget, then every compensation in turn', () => {
    const b = taskBound(def, { sweepIntervalMs: 10, leaderLeaseMs: 1_000 });
    // Each phase: 2 attempts, no park (m − r − 1 = 0), 2 decisions.
    // Each phase: 2 attempts (no park: m − r − 1 = 0) as its give-up time, plus one budget.
    expect(b.steps).toEqual([
      { name: 'a', run: { fixedMs: 3_000, sweeps: 2 }, compensation: { fixedMs: 150, sweeps: 2 } },
      { name: 'b', run: { fixedMs: 9_000, sweeps: 2 } },
      { name: 'c', run: { fixedMs: 1_500, sweeps: 2 }, compensation: { fixedMs: 210, sweeps: 2 } },
    ]);
    expect(b.run).toEqual({ fixedMs: 10_500, sweeps: 4 }); // b then c
    expect(b.undo).toEqual({ fixedMs: 3_000 + 150 + 210, sweeps: 5 });
    expect(b.total).toEqual({ fixedMs: 10_500 + 3_360 + 1_000, sweeps: 9 });
    expect(b.totalMs).toBe(14_860 + 90);
    expect(boundMs(b.run, { sweepIntervalMs: 1_000, leaderLeaseMs: 0 })).toBe(14_500);
  });

  it('a task deadline caps the run phase', () => {
    const capped = taskBound({ ...def, deadlineMs: 2_500 }, { sweepIntervalMs: 10, leaderLeaseMs: 0 });
    expect(capped.run).toEqual({ fixedMs: 2_500, sweeps: 1 });
    // A deadline longer than the run changes nothing.
    expect(taskBound({ ...def, deadlineMs: 60_000 }, { sweepIntervalMs: 10, leaderLeaseMs: 0 }).run).toEqual({ fixedMs: 10_500, sweeps: 4 });
  });

  it('formats a bound for operators', () => {
    expect(formatBound({ fixedMs: 72_500, sweeps: 14 })).toBe('1m 12.5s + 14 sweeps');
    expect(formatBound({ fixedMs: 500, sweeps: 1 }, { sweepIntervalMs: 1_000, leaderLeaseMs: 0 })).toBe('500ms + 1 sweep (≤ 1.5s)');
  });
});
