// The dashboard's pure parts: the DAG layout (columns by dependency depth, every edge pointing right)
// and the attempts timeline read from a task's events.
import { describe, expect, it } from 'vitest';
import type { TaskEvent } from '@triad/protocol';
import { age, attemptsFromEvents, layoutDag, placeText, type DagStep } from '../src/dashboard/view.js';

const step = (name: string, dependsOn: string[] = [], compensation = false): DagStep => ({
  name,
  agent: name,
  dependsOn,
  budgetMs: 1_000,
  ...(compensation ? { compensation: { agent: name, budgetMs: 1_000 } } : {}),
});

describe('layoutDag', () => {
  it('puts each step one column right of its deepest dependency, parallel steps in rows', () => {
    const g = layoutDag([step('reserve', [], true), step('fraud'), step('charge', ['reserve', 'fraud'], true), step('ship', ['charge'])]);
    const at = Object.fromEntries(g.nodes.map((n) => [n.step.name, n]));
    expect(at['reserve']?.x).toBe(at['fraud']?.x);
    expect(at['reserve']?.y).toBeLessThan(at['fraud']?.y ?? 0);
    expect(at['charge']?.x).toBeGreaterThan(at['reserve']?.x ?? 0);
    expect(at['ship']?.x).toBeGreaterThan(at['charge']?.x ?? 0);
    expect(g.edges.map((e) => `${e.from.step.name}>${e.to.step.name}`).sort()).toEqual(['charge>ship', 'fraud>charge', 'reserve>charge']);
    for (const e of g.edges) expect(e.to.x).toBeGreaterThan(e.from.x);
    for (const n of g.nodes) expect(n.x + 180).toBeLessThanOrEqual(g.width);
  });

  it('ignores a dependency on an unknown step and survives a cycle', () => {
    const g = layoutDag([step('a', ['nope']), step('b', ['c']), step('c', ['b'])]);
    expect(g.nodes).toHaveLength(3);
    expect(g.edges.map((e) => `${e.from.step.name}>${e.to.step.name}`).sort()).toEqual(['b>c', 'c>b']);
  });
});

describe('attemptsFromEvents', () => {
  const ev = (seq: number, type: TaskEvent['type'], extra: Partial<TaskEvent> = {}): TaskEvent => ({ taskId: 't', seq, type, at: 1_000 * seq, ...extra });
  const steps = [
    { name: 'charge', agent: 'payment', compensation: { agent: 'payment', attempt: 1, failureCount: 0 } },
    { name: 'ship', agent: 'shipping' },
  ];

  it('reads attempts, their ends and errors, in order, whatever order the events came in', () => {
    const events = [
      ev(4, 'step_started', { step: 'charge', attempt: 2 }),
      ev(1, 'received'),
      ev(2, 'step_started', { step: 'charge', attempt: 1 }),
      ev(3, 'step_retried', { step: 'charge', attempt: 2, reason: 'complete-by passed' }),
      ev(5, 'step_done', { step: 'charge', attempt: 2 }),
      ev(6, 'step_started', { step: 'ship', attempt: 1 }),
      ev(7, 'step_failed', { step: 'ship', attempt: 1, reason: 'shipping 503' }),
      ev(8, 'compensation_started', { step: 'charge', attempt: 1 }),
      ev(9, 'compensation_done', { step: 'charge', attempt: 1 }),
    ];
    expect(attemptsFromEvents(events, steps)).toEqual([
      { step: 'charge', phase: 'run', attempt: 1, agent: 'payment', startedAt: 2_000, endedAt: 3_000, outcome: 'expired', error: 'complete-by passed' },
      { step: 'charge', phase: 'run', attempt: 2, agent: 'payment', startedAt: 4_000, endedAt: 5_000, outcome: 'done' },
      { step: 'ship', phase: 'run', attempt: 1, agent: 'shipping', startedAt: 6_000, endedAt: 7_000, outcome: 'failed', error: 'shipping 503' },
      { step: 'charge', phase: 'undo', attempt: 1, agent: 'payment', startedAt: 8_000, endedAt: 9_000, outcome: 'done' },
    ]);
  });

  it('leaves an attempt without an end running', () => {
    expect(attemptsFromEvents([ev(1, 'step_started', { step: 'ship', attempt: 1 })], steps)).toEqual([
      { step: 'ship', phase: 'run', attempt: 1, agent: 'shipping', startedAt: 1_000, outcome: 'running' },
    ]);
  });
});

describe('age', () => {
  it('says seconds, minutes, hours, days', () => {
    expect([age(0, 5_000), age(0, 120_000), age(0, 7_200_000), age(0, 172_800_000)]).toEqual(['5 s', '2 min', '2 h', '2 d']);
  });
});

describe('the dashboard host check (DNS rebinding)', () => {
  it('on a loopback bind, answers only Host headers that name it; on another bind address, any', async () => {
    const { loopbackHostCheck } = await import('../src/dashboard/server.js');
    const check = loopbackHostCheck('127.0.0.1', () => 8080);
    for (const ok of ['127.0.0.1:8080', 'localhost:8080', '[::1]:8080']) expect(check(ok), ok).toBe(true);
    for (const bad of ['evil.example:8080', '127.0.0.1:9090', 'localhost', undefined]) expect(check(bad), String(bad)).toBe(false);
    expect(loopbackHostCheck('0.0.0.0', () => 8080)('dash.internal:8080')).toBe(true);
  });

  it("a waiting phase's place for its DAG box (decision 0020 §6): exact, approximate, granted, none", () => {
    const q = { agent: 'payment', priority: 3, since: 0, firstAt: 0, why: 'limit' as const };
    expect(placeText({ ...q, place: 12 })).toBe('12');
    expect(placeText({ ...q, place: 4_212, placeApprox: true })).toBe('≤ 4,212');
    expect(placeText({ ...q, granted: true })).toBe('granted');
    expect(placeText(q)).toBeUndefined();
    expect(placeText(undefined)).toBeUndefined();
  });
});
