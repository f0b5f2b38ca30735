import { readFileSync } from 'node:fs';
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

describe('bounds of the kinds of decision 0019 (§1.9)', () => {
  const s = { sweepIntervalMs: 10, leaderLeaseMs: 1_000 };
  const ladder1 = { retries: 1, longBackoffMs: 100, maxFailures: 2, maxCircuitOpen: 0 };

  it('a plain workflow keeps the bound it always had (the orders example)', () => {
    // The example as it was before its approval step and its fan-out (decision 0019): plain agent steps only.
    const doc = JSON.parse(readFileSync(new URL('../../../apps/example-orders/orders.workflow.json', import.meta.url), 'utf8')) as { steps: { name: string; dependsOn?: string[]; forEach?: unknown; maxParallel?: number; maxItems?: number }[] };
    doc.steps = doc.steps
      .filter((x) => x.name !== 'approval')
      .map(({ forEach: _forEach, maxParallel: _maxParallel, maxItems: _maxItems, ...x }) => (x.name === 'charge' ? { ...x, dependsOn: ['reserve', 'fraud'] } : x));
    const orders = validateDefinition(doc);
    // Computed before decision 0019 with the default supervision.
    expect(taskBound(orders)).toMatchObject({ run: { fixedMs: 435_000, sweeps: 54 }, undo: { fixedMs: 440_000, sweeps: 55 }, totalMs: 989_000 });
    expect(taskBound(orders).unknown).toBeUndefined();
  });

  it('a sleep and a wait count their time and the sweep that ends them; they have no undo', () => {
    const def = validateDefinition({
      name: 'w',
      defaults: { ladder: ladder1 },
      steps: [
        { name: 'a', agent: 'x', budgetMs: 1_000 },
        { name: 'nap', sleep: { ms: 3_000 }, dependsOn: ['a'] },
        { name: 'remind', sleep: { untilInput: 'at', maxMs: 60_000 } },
        { name: 'ok', waitFor: { signal: 'ok', timeoutMs: 10_000 }, dependsOn: ['nap'] },
      ],
    });
    const b = taskBound(def, s);
    expect(b.steps).toEqual([
      { name: 'a', run: { fixedMs: 3_000, sweeps: 2 } },
      { name: 'nap', run: { fixedMs: 3_000, sweeps: 1 } },
      { name: 'remind', run: { fixedMs: 60_000, sweeps: 1 } },
      { name: 'ok', run: { fixedMs: 10_000, sweeps: 1 } },
    ]);
    // The longest path: remind (60 s) beats a → nap → ok (16 s); the drain is a's budget (a sleep has none).
    expect(b.run).toEqual({ fixedMs: 60_000, sweeps: 1 });
    expect(b.undo).toEqual({ fixedMs: 1_000, sweeps: 1 });
  });

  it('a fan-out step runs its items in waves of maxParallel, and undoes them so', () => {
    const def = validateDefinition({
      name: 'w',
      defaults: { ladder: ladder1 },
      steps: [{ name: 'ship', agent: 'x', budgetMs: 1_000, forEach: 'items', maxItems: 20, maxParallel: 3, compensate: { agent: 'x', budgetMs: 50 } }],
    });
    const b = taskBound(def, s);
    // ceil(20 / 3) = 7 waves of one element's ladder (3 s + 2 sweeps) and of one compensation (150 ms + 2 sweeps).
    expect(b.steps[0]).toEqual({ name: 'ship', run: { fixedMs: 21_000, sweeps: 14 }, compensation: { fixedMs: 1_050, sweeps: 14 } });
    expect(b.undo).toEqual({ fixedMs: 1_000 + 1_050, sweeps: 15 });
    // Defaults: 100 items, 10 at once.
    const d = validateDefinition({ name: 'w', defaults: { ladder: ladder1 }, steps: [{ name: 'ship', agent: 'x', budgetMs: 1_000, forEach: 'items' }] });
    expect(taskBound(d, s).steps[0]?.run).toEqual({ fixedMs: 30_000, sweeps: 20 });
  });

  describe('a child step', () => {
    const shipment = validateDefinition({
      name: 'shipment',
      defaults: { ladder: ladder1 },
      steps: [{ name: 'label', agent: 'x', budgetMs: 1_000, compensate: { agent: 'x', budgetMs: 50 } }],
    });
    const parent = (child: Record<string, unknown>) =>
      validateDefinition({ name: 'orders', defaults: { ladder: ladder1 }, steps: [{ name: 'a', agent: 'x', budgetMs: 500 }, { name: 'ship-all', child, dependsOn: ['a'] }] });
    const registry = (name: string, version?: number) => (name === 'shipment' && (version === undefined || version === 1) ? shipment : undefined);

    it("ends within its child's own bound, and is undone by the child's undo and a notice", () => {
      const child = taskBound(shipment, s);
      const b = taskBound(parent({ workflow: 'shipment' }), s, registry);
      expect(b.unknown).toBeUndefined();
      expect(b.steps[1]).toEqual({ name: 'ship-all', run: { fixedMs: child.total.fixedMs, sweeps: child.total.sweeps + 2 }, compensation: { fixedMs: child.undo.fixedMs, sweeps: child.undo.sweeps + 1 } });
      // The drain waits for a child being cancelled (its undo) rather than a's 500 ms budget.
      expect(b.undo).toEqual({ fixedMs: child.undo.fixedMs * 2, sweeps: child.undo.sweeps + 1 + 1 + child.undo.sweeps + 1 });
    });

    it('with timeoutMs: the timeout then the child undo, when that is shorter', () => {
      const child = taskBound(shipment, s);
      const short = taskBound(parent({ workflow: 'shipment', timeoutMs: 100 }), s, registry);
      expect(short.steps[1]?.run).toEqual({ fixedMs: 100 + child.undo.fixedMs, sweeps: child.undo.sweeps + 2 });
      const long = taskBound(parent({ workflow: 'shipment', timeoutMs: 3_600_000 }), s, registry);
      expect(long.steps[1]?.run).toEqual({ fixedMs: child.total.fixedMs, sweeps: child.total.sweeps + 2 });
    });

    it('is unknown, and says why, when the child workflow is not registered, not looked up, or they form a cycle', () => {
      expect(taskBound(parent({ workflow: 'shipment', version: 7 }), s, registry).unknown).toEqual([
        'step "ship-all" starts workflow "shipment" v7, which is not registered: its bound is the child\'s own',
      ]);
      expect(taskBound(parent({ workflow: 'shipment' }), s).unknown).toEqual(['step "ship-all" starts workflow "shipment", which was not looked up: its bound is the child\'s own']);
      const a = validateDefinition({ name: 'a', steps: [{ name: 'go', child: { workflow: 'b' } }] });
      const b = validateDefinition({ name: 'b', steps: [{ name: 'back', child: { workflow: 'a' } }] });
      const both = (n: string) => (n === 'a' ? a : n === 'b' ? b : undefined);
      expect(taskBound(a, s, both).unknown).toEqual(['step "go" starts workflow "b", whose bound is unknown (child workflows form a cycle: a -> b -> a)']);
    });
  });
});
