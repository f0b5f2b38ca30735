// Decision 0021 §3.5: each waiting reason `triad status` can name from a task's state, with its text (a
// fixed `now`; times print in local HH:MM:SS, so the expectations build them the same way).
import { describe, expect, it } from 'vitest';
import type { StepState, TaskState } from '@triad/protocol';
import { clock } from '../src/format.js';
import { probeKey, stepWaiting, taskWaiting, waitReason, type WaitContext } from '../src/waiting.js';

const NOW = 1_700_000_000_000;
const hh = (ms: number): string => clock(ms).slice(0, 8);
const step = (name: string, o: Partial<StepState> = {}): StepState => ({ name, agent: name === 'charge' ? 'payment' : 'inventory', status: 'pending', attempt: 0, failureCount: 0, dependsOn: [], ...o });
const task = (status: TaskState['status'], steps: StepState[]) => ({ status, steps });

describe('why a step waits', () => {
  it('dependencies: the ones not yet done', () => {
    const t = task('running', [step('reserve', { status: 'processing', attempt: 1, completeBy: NOW + 3_200 }), step('fraud', { status: 'processed' }), step('charge', { dependsOn: ['reserve', 'fraud'] })]);
    expect(stepWaiting(t, t.steps[2]!, NOW)).toBe('waiting for reserve');
  });

  it('a child step: waiting for its child task (until its timeout), cancelling it, undoing it (decision 0019 §5)', () => {
    const child = { taskId: 'o1:ship-all:1', workflow: 'shipment', version: 2 };
    const waiting = step('ship-all', { status: 'waiting', attempt: 1, child: { ...child, op: 'start' }, until: NOW + 55_200 });
    expect(stepWaiting(task('running', [waiting]), waiting, NOW)).toBe(`waiting for child task o1:ship-all:1 (shipment@2) until ${hh(NOW + 55_200)} (in 55.2s)`);
    const cancelling = step('ship-all', { status: 'abandoned', attempt: 1, child: { ...child, op: 'cancel' } });
    expect(stepWaiting(task('failed', [cancelling]), cancelling, NOW)).toBe('cancelling child task o1:ship-all:1 (shipment@2)');
    const undoing = step('ship-all', { status: 'compensating', attempt: 1, child: { ...child, op: 'undo' } });
    expect(stepWaiting(task('compensating', [undoing]), undoing, NOW)).toMatch(/undoing child task o1:ship-all:1 \(shipment@2\)$/);
    // Once its notice came, the step no longer waits for the child.
    const ended = step('ship-all', { status: 'processed', attempt: 1, child: { ...child, op: 'start', ended: 'completed' } });
    expect(waitReason(task('running', [ended]), ended, NOW)).toBeUndefined();
  });

  it('in flight at its agent until complete-by, and overdue once complete-by passed', () => {
    const s = step('charge', { status: 'processing', attempt: 2, completeBy: NOW + 3_200 });
    expect(stepWaiting(task('running', [s]), s, NOW)).toBe(`in flight at a payment agent (attempt 2) until complete-by ${hh(NOW + 3_200)} (in 3.2s)`);
    expect(stepWaiting(task('running', [s]), s, NOW + 7_400)).toBe('complete-by passed 4.2s ago: waiting for the supervisor (is one running? triad supervisor status)');
  });

  it('a reported failure waits for the supervisor\'s decision', () => {
    const s = step('charge', { status: 'processing', attempt: 2, completeBy: NOW, error: 'payment 503' });
    expect(stepWaiting(task('running', [s]), s, NOW + 100)).toBe('attempt 2 failed (payment 503); the supervisor decides the next try at its next sweep');
  });

  it('a breaker parked until T, a back-off until T (the park\'s recorded cause), and a park that ended', () => {
    const breaker = step('charge', { status: 'parked', attempt: 3, completeBy: NOW + 2_100, parkedFor: 'breaker', circuitCount: 2 });
    expect(stepWaiting(task('running', [breaker]), breaker, NOW)).toBe(`parked until ${hh(NOW + 2_100)} (in 2.1s): payment's circuit breaker is open (refusal 2)`);
    const backoff = step('charge', { status: 'parked', attempt: 4, failureCount: 4, completeBy: NOW + 4_200, parkedFor: 'backoff', error: 'payment 500' });
    expect(stepWaiting(task('running', [backoff]), backoff, NOW)).toBe(`backing off until ${hh(NOW + 4_200)} (in 4.2s) after 4 failures: payment 500`);
    expect(stepWaiting(task('running', [backoff]), backoff, NOW + 5_000)).toBe('the park ended 800ms ago: waiting for the supervisor (is one running? triad supervisor status)');
  });

  it('a step waiting for a dispatch limit, or put back in line by a throttle, and a compensation waiting for one (decision 0020)', () => {
    const q = step('charge', { status: 'queued', queue: { agent: 'payment', key: 'c-42', priority: 3, since: NOW - 8_100, firstAt: NOW - 8_100, why: 'limit' } });
    expect(stepWaiting(task('running', [q]), q, NOW)).toBe('waits for a limit of payment (key c-42, priority 3, 8.1s so far)');
    const th = step('charge', { status: 'queued', queue: { agent: 'payment', priority: 1, since: NOW - 500, firstAt: NOW - 9_000, why: 'throttled' } });
    expect(stepWaiting(task('running', [th]), th, NOW)).toBe('throttled by payment: back in line (priority 1, 500ms so far)');
    const comp = step('charge', { status: 'compensating', compensation: { agent: 'payment', attempt: 0, failureCount: 0, queue: { agent: 'payment', priority: 3, since: NOW - 1_000, firstAt: NOW - 1_000, why: 'limit' } } });
    expect(stepWaiting(task('compensating', [comp]), comp, NOW)).toBe('compensation waits for a limit of payment (priority 3, 1.0s so far)');
  });

  it("a waiting step's place in line as task.get read it from the limiter: exact, approximate, throttled with a pause, granted (decision 0020 §6)", () => {
    const base = { agent: 'payment', priority: 3, since: NOW - 8_100, firstAt: NOW - 8_100 };
    const exact = step('charge', { status: 'queued', queue: { ...base, key: 'c-42', why: 'limit', place: 12, level: 3 } });
    expect(stepWaiting(task('running', [exact]), exact, NOW)).toBe('waits for a limit of payment: place 12 (key c-42, priority 3, 8.1s so far)');
    const approx = step('charge', { status: 'queued', queue: { ...base, why: 'limit', place: 4_212, placeApprox: true } });
    expect(stepWaiting(task('running', [approx]), approx, NOW)).toBe('waits for a limit of payment: place ≤ 4,212 (priority 3, 8.1s so far)');
    const throttled = step('charge', { status: 'queued', queue: { ...base, why: 'throttled', place: 3, pausedUntil: NOW + 2_000 } });
    expect(stepWaiting(task('running', [throttled]), throttled, NOW)).toBe(`throttled by payment: paused until ${hh(NOW + 2_000)}, then place 3 (priority 3, 8.1s so far)`);
    // The pause has ended by the time it is shown: back in line at its place.
    expect(stepWaiting(task('running', [throttled]), throttled, NOW + 3_000)).toBe('throttled by payment: back in line, place 3 (priority 3, 11.1s so far)');
    const granted = step('charge', { status: 'queued', queue: { ...base, why: 'limit', granted: true } });
    expect(stepWaiting(task('running', [granted]), granted, NOW)).toBe('waits for a limit of payment: granted, starting (priority 3, 8.1s so far)');
  });

  it('a sleep and a signal until T', () => {
    const sleeping = step('pause', { status: 'sleeping', until: NOW + 1_200 });
    expect(stepWaiting(task('running', [sleeping]), sleeping, NOW)).toBe(`sleeping until ${hh(NOW + 1_200)} (in 1.2s)`);
    expect(stepWaiting(task('running', [sleeping]), sleeping, NOW + 2_000)).toMatch(/^the wake-up time passed 800ms ago: waiting for the supervisor/);
    const waiting = step('approval', { status: 'waiting', until: NOW + 55_200, signal: 'approved' });
    expect(stepWaiting(task('running', [waiting]), waiting, NOW)).toBe(`waiting for signal approved until ${hh(NOW + 55_200)} (in 55.2s)`);
  });

  it('the undo: a pending step will not run, a compensation waits for a step in flight, then goes latest first, and its own attempt in flight', () => {
    const reserve = step('reserve', { status: 'processed', effect: 'applied', order: 1 });
    const fraud = step('fraud', { status: 'processed', effect: 'applied', order: 2 });
    const charge = step('charge', { status: 'processing', attempt: 1, completeBy: NOW + 1_000, effect: 'unknown' });
    const ship = step('ship', { dependsOn: ['charge'] });
    const t = task('compensating', [reserve, fraud, charge, ship]);
    expect(stepWaiting(t, ship, NOW)).toBe('will not run: the task is being undone');
    expect(stepWaiting(t, reserve, NOW)).toBe('the undo waits for charge (in flight) before compensating');
    const drained = task('compensating', [reserve, { ...fraud, status: 'compensating', compensation: { agent: 'inventory', attempt: 1, failureCount: 0, completeBy: NOW + 3_000 } }]);
    expect(stepWaiting(drained, reserve, NOW)).toBe('to be compensated after fraud (latest first)');
    expect(stepWaiting(drained, drained.steps[1]!, NOW)).toBe(`compensation in flight at a inventory agent (attempt 1) until complete-by ${hh(NOW + 3_000)} (in 3.0s)`);
    const parked = { ...fraud, status: 'compensating' as const, compensation: { agent: 'inventory', attempt: 2, failureCount: 2, completeBy: NOW + 9_000, parked: true, parkedFor: 'backoff' as const, error: 'inventory 500' } };
    expect(stepWaiting(task('compensating', [reserve, parked]), parked, NOW)).toBe(`compensation backing off until ${hh(NOW + 9_000)} (in 9.0s) after 2 failures: inventory 500`);
  });

  it('in flight at the agent instance that answered the probe (its try, since when, a back-off between tries)', () => {
    const s = step('charge', { status: 'processing', attempt: 2, completeBy: NOW + 3_200 });
    const ctx: WaitContext = { probes: { [probeKey('run', 'charge', 2)]: { agentId: 'payment-7f3a', since: NOW - 5_000, try: 2, state: 'calling' } } };
    expect(stepWaiting(task('running', [s]), s, NOW, ctx)).toBe(`in flight at payment-7f3a (try 2, since ${hh(NOW - 5_000)}) until complete-by ${hh(NOW + 3_200)} (in 3.2s)`);
    const between: WaitContext = { probes: { [probeKey('run', 'charge', 2)]: { agentId: 'payment-7f3a', since: NOW - 5_000, try: 2, state: 'backing_off', nextTryAt: NOW + 1_000 } } };
    expect(stepWaiting(task('running', [s]), s, NOW, between)).toBe(`in flight at payment-7f3a (try 2, since ${hh(NOW - 5_000)}, backing off until ${hh(NOW + 1_000)}) until complete-by ${hh(NOW + 3_200)} (in 3.2s)`);
    // Another attempt's answer is not this one's.
    expect(stepWaiting(task('running', [s]), s, NOW, { probes: { [probeKey('run', 'charge', 1)]: { agentId: 'x', since: NOW, try: 1 } } })).toMatch(/^in flight at a payment agent \(attempt 2\)/);
  });

  it('no agent answered the probe: not yet taken by any agent (its queue), or unknown', () => {
    const s = step('charge', { status: 'processing', attempt: 1, completeBy: NOW + 3_200 });
    const probes = { [probeKey('run', 'charge', 1)]: null };
    expect(stepWaiting(task('running', [s]), s, NOW, { probes, queues: { payment: { pending: 1_204, pulling: 0 } } })).toBe(
      `not yet taken by any payment agent: 1,204 requests wait, 0 agents pulling; complete-by ${hh(NOW + 3_200)} (in 3.2s)`,
    );
    expect(stepWaiting(task('running', [s]), s, NOW, { probes, queues: { payment: { pending: 0, pulling: 2 } } })).toBe(`in flight at a payment agent until complete-by ${hh(NOW + 3_200)} (in 3.2s) (no agent answered the probe)`);
  });

  it('overdue: the supervisor leader and its last sweep, or no supervisor leading', () => {
    const s = step('charge', { status: 'processing', attempt: 2, completeBy: NOW - 4_200 });
    expect(stepWaiting(task('running', [s]), s, NOW, { supervisor: { leader: { id: 'sup-1a2b', lastSweepAt: NOW - 800 } } })).toBe('complete-by passed 4.2s ago: waiting for the supervisor (leader sup-1a2b, last sweep 800ms ago)');
    expect(stepWaiting(task('running', [s]), s, NOW, { supervisor: {} })).toBe('complete-by passed 4.2s ago: no supervisor is leading — start one (triad supervisor)');
    const waiting = step('approval', { status: 'waiting', until: NOW - 1_000, signal: 'approved' });
    expect(stepWaiting(task('running', [waiting]), waiting, NOW, { supervisor: {} })).toBe('the timeout passed 1.0s ago: no supervisor is leading — start one (triad supervisor)');
  });

  it("a fan-out step's items, and what a finished step's kind says (one function for both)", () => {
    const fan = step('ship', { status: 'processing', items: { count: 5, pending: 0, running: 2, done: 3, failed: 0 } });
    expect(waitReason(task('running', [fan]), fan, NOW)?.kind).toBe('items');
    expect(stepWaiting(task('running', [fan]), fan, NOW)).toBe('elements 3 done, 2 running of 5');
    const skipped = step('notify', { status: 'skipped', reason: 'amount 10 is not > 1000' });
    expect(stepWaiting(task('completed', [skipped]), skipped, NOW)).toBe('skipped: amount 10 is not > 1000');
  });

  it("the task-level reason is the first waiting step's", () => {
    const t = task('running', [step('reserve', { status: 'processed' }), step('fraud', { status: 'processing', attempt: 1, completeBy: NOW + 1_000 }), step('charge', { dependsOn: ['fraud'] })]);
    expect(taskWaiting(t, NOW)).toMatchObject({ step: 'fraud', reason: { kind: 'in_flight' } });
  });

  it('says nothing of a finished step', () => {
    const done = step('reserve', { status: 'processed' });
    expect(waitReason(task('completed', [done]), done, NOW)).toBeUndefined();
  });
});
