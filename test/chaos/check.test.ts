// The chaos verdict on hand-made ledgers: each counter counts what its definition says, and nothing else.
import { describe, expect, it } from 'vitest';
import type { Effect } from '@triad/example-orders';
import type { StepStatus, TaskState, TaskStatus } from '@triad/protocol';
import { check, checkLimits, passed, type CheckInput } from './check.js';
import { chaosBound } from './workflow.js';

const NS = 'chaos_ns';
const { definition, bound } = chaosBound();
const STOPPED = 1_000_000;
const ALLOWANCE = 5_000;

function effect(key: string, o: Partial<Effect> = {}): Effect {
  return {
    idempotencyKey: key,
    action: 'apply',
    payload: null,
    document: null,
    applied: true,
    tombstone: false,
    appliedAt: new Date(0).toISOString(),
    result: {},
    calls: 1,
    lateApplies: 0,
    undone: false,
    undoneAt: null,
    undoneBy: null,
    undoResult: null,
    reversals: 0,
    ...o,
  };
}

const undone = (key: string): Partial<Effect> => ({ undone: true, undoneBy: `${key}/compensate`, reversals: 1, undoneAt: new Date(0).toISOString(), undoResult: {} });
const tombstone = (key: string): Partial<Effect> => ({ ...undone(key), applied: false, tombstone: true, action: null, result: null, appliedAt: null, reversals: 0 });
const key = (task: string, step: string): string => `${NS}/${task}/${step}`;
/** The example's ship fans out over the reservation's lines: its effects are its elements' (decision 0019 §4). */
const shipKey = (task: string, element = 0): string => `${key(task, 'ship')}/${element}`;

function state(taskId: string, status: TaskStatus, o: { createdAt?: number; finishedAt?: number; steps?: Record<string, StepStatus> } = {}): TaskState {
  const createdAt = o.createdAt ?? STOPPED - 10_000;
  return {
    taskId,
    workflow: 'orders',
    version: 1,
    status,
    lockEpoch: 0,
    seq: 1,
    createdAt,
    updatedAt: o.finishedAt ?? createdAt + 1_000,
    ...(['running', 'compensating'].includes(status) ? {} : { finishedAt: o.finishedAt ?? createdAt + 1_000 }),
    steps: definition.steps.map((s) => ({ name: s.name, agent: s.agent ?? '', status: o.steps?.[s.name] ?? 'processed', attempt: 1, failureCount: 0, dependsOn: s.dependsOn })),
  };
}

/** A completed task's ledger: every step applied once, nothing undone. */
function completed(task: string): Record<string, Effect[]> {
  return {
    inventory: [effect(key(task, 'reserve'))],
    fraud: [effect(key(task, 'fraud'))],
    payment: [effect(key(task, 'charge'))],
    shipping: [effect(shipKey(task))],
  };
}

function merge(...ledgers: Record<string, Effect[]>[]): Record<string, Effect[]> {
  const out: Record<string, Effect[]> = { inventory: [], fraud: [], payment: [], shipping: [] };
  for (const l of ledgers) for (const [s, list] of Object.entries(l)) out[s] = [...(out[s] ?? []), ...list];
  return out;
}

function input(o: Partial<CheckInput> & Pick<CheckInput, 'states' | 'ledgers'>): CheckInput {
  return { namespace: NS, definition, accepted: [...o.states.keys()], unacknowledged: [], boundMs: bound.totalMs, allowanceMs: ALLOWANCE, faultsStoppedAt: STOPPED, ...o };
}

describe('chaos verdict', () => {
  it('a clean run: completed tasks applied once each, an undone task fully undone (tombstone included), passes', () => {
    const r = key('t2', 'reserve');
    const c = key('t2', 'charge');
    const s = shipKey('t2');
    const v = check(
      input({
        states: new Map([
          ['t1', state('t1', 'completed')],
          ['t2', state('t2', 'cancelled', { steps: { ship: 'compensated' } })],
        ]),
        ledgers: merge(completed('t1'), {
          inventory: [effect(r, undone(r))],
          fraud: [effect(key('t2', 'fraud'))], // the screening has no compensation: it stays, by design
          payment: [effect(c, { ...undone(c), calls: 3 })],
          shipping: [effect(s, { ...tombstone(s), lateApplies: 1 })],
        }),
      }),
    );
    expect(v).toMatchObject({ tasks: 2, terminal: 2, lost: 0, duplicate_effects: 0, orphan_effects: 0, wrong_undos: 0, unbounded: 0, late_applies_refused: 1, duplicate_calls: 2 });
    expect(v.status).toEqual({ completed: 1, cancelled: 1 });
    expect(passed(v)).toBe(true);
  });

  it('an applied effect left behind by an undo is an orphan, counted with the step status Triad reported', () => {
    const r = key('t1', 'reserve');
    const v = check(
      input({
        states: new Map([
          ['t1', state('t1', 'cancelled', { steps: { reserve: 'compensated', charge: 'abandoned' } })],
          ['t2', state('t2', 'compensated', { steps: { ship: 'compensated' } })],
        ]),
        ledgers: merge({ inventory: [effect(r, undone(r))], payment: [effect(key('t1', 'charge'))] }, completed('t2')),
      }),
    );
    // t1: the charge in flight at the cancel applied and was never refunded; t2: nothing was undone at all.
    expect(v.orphan_effects).toBe(4);
    expect(v.orphan_step_status).toEqual({ abandoned: 1, processed: 2, compensated: 1 });
    expect(v.examples.orphan[0]).toContain(key('t1', 'charge'));
    expect(passed(v)).toBe(false);
  });

  it('a fan-out step: each element is its own run key — one left applied by an undo is an orphan; an element key on a step that does not fan out is foreign', () => {
    const s0 = shipKey('t1', 0);
    const ledger = merge(
      { inventory: [effect(key('t1', 'reserve'), undone(key('t1', 'reserve')))], fraud: [effect(key('t1', 'fraud'))], payment: [effect(key('t1', 'charge'), undone(key('t1', 'charge')))] },
      { shipping: [effect(s0, undone(s0)), effect(shipKey('t1', 1))] },
    );
    const v = check(input({ states: new Map([['t1', state('t1', 'compensated', { steps: { reserve: 'compensated', charge: 'compensated', ship: 'compensated' } })]]), ledgers: ledger }));
    expect(v.orphan_effects).toBe(1);
    expect(v.examples.orphan[0]).toContain(shipKey('t1', 1));
    expect(v.fan_outs_with_several_elements).toBe(1);
    expect(v.duplicate_effects).toBe(0);
    const foreign = completed('t2');
    foreign['payment']!.push(effect(`${key('t2', 'charge')}/0`));
    foreign['shipping']!.push(effect(key('t2', 'ship'))); // the fan-out step's own key: no element applies under it
    const w = check(input({ states: new Map([['t2', state('t2', 'completed')]]), ledgers: foreign }));
    expect(w.duplicate_detail.foreign_keys).toBe(2);
  });

  it('effects left on failed or compensation_failed tasks are left for the operator, not orphans', () => {
    const v = check(input({ states: new Map([['t1', state('t1', 'compensation_failed')]]), ledgers: completed('t1') }));
    expect(v.orphan_effects).toBe(0);
    expect(v.left_for_operator).toBe(3);
  });

  it('an undo (or tombstone) on a completed task is a wrong undo', () => {
    const r = key('t1', 'reserve');
    const s = shipKey('t1');
    const ledger = completed('t1');
    ledger['inventory'] = [effect(r, undone(r))];
    ledger['shipping'] = [effect(s, tombstone(s))];
    const v = check(input({ states: new Map([['t1', state('t1', 'completed')]]), ledgers: ledger }));
    expect(v.wrong_undos).toBe(2);
    expect(v.orphan_effects).toBe(0);
  });

  it('duplicates: reverted twice, applied on two services, a foreign key, a wrong undo key, and one step under two keys', () => {
    const c = key('t1', 'charge');
    const ledger = completed('t1');
    ledger['payment'] = [effect(c, { ...undone(c), reversals: 2 })];
    ledger['shipping']!.push(effect(c)); // the charge's key applied by shipping too
    ledger['inventory']!.push(effect(key('nobody', 'reserve'))); // a task nobody submitted
    ledger['fraud']![0] = effect(key('t1', 'fraud'), { undone: true, undoneBy: 'someone-else', reversals: 1 });
    ledger['inventory']!.push(effect(`${key('t1', 'reserve')}/again`)); // applied under a second key
    const v = check(input({ states: new Map([['t1', state('t1', 'cancelled')]]), ledgers: ledger }));
    expect(v.duplicate_detail).toEqual({ applied_twice: 1, undone_twice: 1, foreign_keys: 3, foreign_undos: 1, multi_key: 2 });
    expect(v.duplicate_effects).toBe(8);
    expect(passed(v)).toBe(false);
  });

  it('keys of an unacknowledged submission that ran anyway are not foreign, and its task is checked', () => {
    const v = check(
      input({
        accepted: [],
        unacknowledged: ['u1', 'u2'],
        states: new Map([['u1', state('u1', 'cancelled')]]),
        ledgers: completed('u1'),
      }),
    );
    expect(v).toMatchObject({ tasks: 0, not_accepted: 2, not_accepted_but_ran: 1, lost: 0, duplicate_effects: 0, orphan_effects: 3 });
  });

  it('lost: an accepted task not terminal, or never found', () => {
    const v = check(input({ accepted: ['t1', 't2', 't3'], states: new Map([['t1', state('t1', 'compensating')], ['t3', state('t3', 'completed')]]), ledgers: {} }));
    expect(v).toMatchObject({ lost: 2, terminal: 1 });
    expect(v.status).toEqual({ compensating: 1, not_found: 1, completed: 1 });
  });

  it('unbounded: terminal later than max(createdAt, faultsStoppedAt) + bound + allowance', () => {
    const limit = bound.totalMs + ALLOWANCE;
    const v = check(
      input({
        states: new Map([
          ['early-ok', state('early-ok', 'completed', { createdAt: STOPPED - 60_000, finishedAt: STOPPED + limit })],
          ['early-late', state('early-late', 'completed', { createdAt: STOPPED - 60_000, finishedAt: STOPPED + limit + 1 })],
          ['after-ok', state('after-ok', 'cancelled', { createdAt: STOPPED + 5_000, finishedAt: STOPPED + 5_000 + limit })],
          ['after-late', state('after-late', 'compensated', { createdAt: STOPPED + 5_000, finishedAt: STOPPED + 5_001 + limit })],
        ]),
        ledgers: {},
      }),
    );
    expect(v.unbounded).toBe(2);
    expect(v.examples.unbounded.map((e) => e.split(':')[0])).toEqual(['early-late', 'after-late']);
  });
});

describe('the limits lane (decision 0020 §9.4)', () => {
  const state = (taskId: string, status: TaskStatus, error?: string): TaskState => ({ taskId, workflow: 'orders', version: 1, status, input: {}, lockEpoch: 0, seq: 0, createdAt: 0, updatedAt: 0, steps: [], ...(error ? { error } : {}) });
  const ok = { concurrency: 3, maxInFlight: 3, inFlightAfter: 0, waitingAfter: 0, states: new Map([['a', state('a', 'completed')], ['b', state('b', 'failed', 'step charge: payment 503')]]) };

  it('passes when the service never held more than the limit and the limiter came back to nothing', () => {
    expect(checkLimits(ok)).toEqual({ concurrency: 3, max_in_flight: 3, in_flight_after: 0, waiting_after: 0, failed_by_throttle: 0, ok: true });
  });

  it('fails on more calls at once than the limit, a permit or a ticket left behind, or a task failed by a throttle', () => {
    expect(checkLimits({ ...ok, maxInFlight: 4 }).ok).toBe(false);
    expect(checkLimits({ ...ok, inFlightAfter: 1 }).ok).toBe(false);
    expect(checkLimits({ ...ok, waitingAfter: 2 }).ok).toBe(false);
    const throttled = checkLimits({ ...ok, states: new Map([['c', state('c', 'failed', 'step charge: throttled by the service: payment is rate limited')]]) });
    expect(throttled).toMatchObject({ failed_by_throttle: 1, ok: false });
  });
});
