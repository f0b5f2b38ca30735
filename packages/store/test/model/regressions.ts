// Cases the model-based test must keep passing, replayed operation by operation and followed by the calm
// phase, in every `npm test`: shrunk counterexamples it found, the store bugs it found (fixed since), and
// hand-written sequences for situations the random runs reach only rarely. A case may add `expect`:
// checks of the real store after its operations that do not lean on the model.
import type { Op } from './ops.js';
import { readAlerts, readTask } from './real.js';
import type { Env } from './runner.js';

export interface Regression {
  name: string;
  /** What it covers; for a found counterexample, what went wrong and what was fixed (the model or the store). */
  why: string;
  ops: Op[];
  /** Problems with the real store after the operations (before the calm phase); none = pass. */
  expect?: (env: Env) => Promise<string[]>;
}

const fast: { run: [number, number, number, number]; comp: [number, number, number, number] } = { run: [0, 100, 1, 0], comp: [0, 100, 1, 0] };
const ladder = { run: [1, 100, 2, 1] as [number, number, number, number], comp: [0, 100, 1, 0] as [number, number, number, number] };

/** `what` was `real`, expected `wanted`: one problem line, or none. */
function want(what: string, real: unknown, wanted: unknown): string[] {
  return JSON.stringify(real) === JSON.stringify(wanted) ? [] : [`${what}: ${JSON.stringify(real)}, expected ${JSON.stringify(wanted)}`];
}

async function step(env: Env, taskId: string, name: string) {
  const t = await readTask(env.sys, taskId);
  const rec = t.recs.get(name);
  if (!rec) throw new Error(`regression: task ${taskId} has no step ${name}`);
  return { task: t, rec };
}

export const REGRESSIONS: Regression[] = [
  {
    name: 'two in-doubt steps that started in the same millisecond',
    why: 'hand-written: fan-out b ∥ c in flight, the task cancelled, both expire in the drain (no result: effect unknown — decision 0010, no claim needed; same start time): their compensations are tied in the undo order, which decision 0009 leaves open; either may go first, then the other, then the task is cancelled',
    ops: [
      { t: 'submit', choice: { shape: 5, ...fast }, publish: true },
      { t: 'result', pick: 0, outcome: { type: 'ok' }, lag: 0, publish: true },
      { t: 'cancel', pick: 0, lag: 0, publish: true },
      { t: 'expire', pick: 0, when: 'due', lag: 0, publish: true },
      { t: 'expire', pick: 0, when: 'due', lag: 0, publish: true },
    ],
    expect: async (env) => {
      const { task } = await step(env, 't1', 'b');
      return want('effects of b, c after their drain expiry', [task.recs.get('b')?.effect, task.recs.get('c')?.effect], ['unknown', 'unknown']);
    },
  },
  {
    name: 'the compensation order key of a step whose compensation just started',
    why: 'found (FC_SEED=21): a drained step processed at the same millisecond as another is compensated first by completion order; the invariant first read the key of the step already compensating as in-doubt (the invariant was wrong, not the store: a completed run keeps its order)',
    ops: [
      { t: 'submit', choice: { shape: 1, ...fast }, publish: true },
      { t: 'result', pick: 0, outcome: { type: 'circuit_open', effect: 'none', retryAfterMs: 50 }, lag: 0, publish: true },
      { t: 'submit', choice: { shape: 5, ...fast }, publish: true },
      { t: 'result', pick: 0, outcome: { type: 'ok' }, lag: 0, publish: true },
      { t: 'expireTask', pick: 0, when: 'due', publish: true },
      { t: 'cancel', pick: 9, lag: 0, publish: true },
      { t: 'duplicate', pick: 0 },
    ],
  },
  {
    name: 'a parked phase keeps the reported mark of the failure that parked it',
    why: 'found (FC_SEED=1): a retryable report, then the supervisor parks the step; the Lua leaves `reported` set on the parked record (harmless: nothing reads it there, the next start clears it); the model compared it while parked (the model was wrong)',
    ops: [
      { t: 'submit', choice: { shape: 0, run: [0, 100, 2, 0], comp: [0, 100, 1, 0] }, publish: true },
      { t: 'result', pick: 0, outcome: { type: 'retryable', effect: 'none' }, lag: 0, publish: true },
      { t: 'sweep', publish: true },
    ],
  },
  {
    name: 'a retried step that fails again raises a new alert',
    why: 'found (FC_SEED=205, 206; 201, 202 with a retryable failure) when alert ids named the failure count: a step fails permanently, the operator retries it at once and it fails again with the same failureCount — the same alert id, which JetStream would drop as a repeat. Alert ids now name the attempt that gave up (decision 0009 §4): the second failure is a new alert, both are in the outbox, only the second is open',
    ops: [
      { t: 'submit', choice: { shape: 2, ...fast }, publish: true },
      { t: 'result', pick: 0, outcome: { type: 'permanent', effect: 'none' }, lag: 0, publish: true },
      { t: 'retry', pick: 0, step: null, any: false, lag: 0, publish: true },
      { t: 'result', pick: 0, outcome: { type: 'permanent', effect: 'none' }, lag: 0, publish: true },
    ],
    expect: async (env) => {
      const alerts = await readAlerts(env.sys);
      return [
        ...want('outbox ids', alerts.outbox.map((e) => e.alert.id).sort(), ['t1:a:step_failed:1', 't1:a:step_failed:2']),
        ...want('open alert ids', [...alerts.open.keys()], ['t1:a:step_failed:2']),
      ];
    },
  },
  {
    name: 'a step that fails at its start again, after a retry, raises a new alert',
    why: 'found (FC_SEED=2) when decision 0019 increment 4 began: a sleep whose untilInput is absent fails at its start with attempt 0; the operator retries at once and it fails the same way — the alert id named attempt 0 both times (JetStream would drop the second as a repeat) and the model closed the new alert after readiness raised it. Failures at a start now name their alert start-<n>, and a retry closes the old alerts before readiness',
    ops: [
      { t: 'submit', choice: { shape: 9, run: [0, 100, 1, 0], comp: [0, 100, 1, 0] }, publish: true, client: 0 },
      { t: 'result', pick: 0, outcome: { type: 'ok' }, lag: 0, publish: true, agent: 0 },
      { t: 'retry', pick: 0, step: null, any: false, lag: 0, publish: true },
    ],
    expect: async (env) => {
      const alerts = await readAlerts(env.sys);
      return [
        ...want('outbox ids', alerts.outbox.map((e) => e.alert.id).sort(), ['t1:remind:step_failed:start-1', 't1:remind:step_failed:start-2']),
        ...want('open alert ids', [...alerts.open.keys()], ['t1:remind:step_failed:start-2']),
      ];
    },
  },
  {
    name: 'a duplicate of a reported failure is stale',
    why: 'store bug found by the model (was known-bugs.ts "duplicate-of-reported-result"): applyResult.lua accepted a second delivery of a result whose attempt had already reported a retryable failure — completeBy moved, circuitCount grew again, a second step_failed event. Fixed on main: the phase being `reported` fences it out (STALE, decision 0001 "a duplicate delivery")',
    ops: [
      { t: 'submit', choice: { shape: 4, ...ladder }, publish: true },
      { t: 'result', pick: 0, outcome: { type: 'retryable', effect: 'none' }, lag: 0, publish: true },
      { t: 'advance', ms: 40 },
      { t: 'duplicate', pick: 0 },
    ],
    expect: async (env) => {
      const { task, rec } = await step(env, 't1', 'a');
      return [...want('staleResults', task.staleResults, 1), ...want('a completeBy (the first report’s now)', rec.completeBy, task.view.createdAt)];
    },
  },
  {
    name: 'inFlight does not re-send a compensation that reported a failure',
    why: 'store bug found by the model (was known-bugs.ts "in-flight-resends-reported-compensation"): TaskStore.inFlight re-sent a compensation whose attempt had reported a retryable failure (it rightly skipped such a run), so an agent ran the same compensation attempt again. Fixed on main: a reported compensation is not in flight (the supervisor decides its next attempt)',
    ops: [
      // linear a → b: a done, b reports a failure, the cancel abandons b and compensates a.
      { t: 'submit', choice: { shape: 2, ...ladder }, publish: true },
      { t: 'result', pick: 0, outcome: { type: 'ok' }, lag: 0, publish: true },
      { t: 'result', pick: 0, outcome: { type: 'retryable', effect: 'none' }, lag: 0, publish: true },
      { t: 'cancel', pick: 0, lag: 0, publish: true },
      { t: 'result', pick: 0, outcome: { type: 'retryable', effect: 'unknown' }, lag: 0, publish: true },
      { t: 'resend', pick: 0 },
    ],
    expect: async (env) => want('inFlight requests', (await env.sys.store.inFlight('t1'))?.dispatch, []),
  },
  {
    name: 'a retry naming a step abandoned when its task failed restarts the failed step too',
    why: 'store bug found by the model (was known-bugs.ts "retry-of-abandoned-step-leaves-failed-step"): retryStep.lua restarted the named abandoned step but not the step that failed the task; the task was running again with a step failed for good, could never complete, and once the restarted step finished had no member in the deadline index (decision 0009 invariant; invariant 1, no task is lost). Fixed on main: a run retry of a FAILED task restarts every step it stopped, whichever is named',
    ops: [
      // fan-in a ∥ b → c: a fails permanently, the task fails and abandons b; the operator retries b.
      { t: 'submit', choice: { shape: 3, ...fast }, publish: true },
      { t: 'result', pick: 0, outcome: { type: 'permanent', effect: 'none' }, lag: 0, publish: true },
      { t: 'retry', pick: 0, step: 1, any: false, lag: 0, publish: true },
      { t: 'result', pick: 0, outcome: { type: 'ok' }, lag: 0, publish: true },
    ],
    expect: async (env) => {
      const { task } = await step(env, 't1', 'a');
      return want('task status, attempts of a and b', [task.view.status, task.recs.get('a')?.attempt, task.recs.get('b')?.attempt], ['running', 2, 2]);
    },
  },
  {
    name: 'a retry of a parked step in a running task keeps the task deadline',
    why: 'hand-written (decided with the store fixes): only a retry of a FAILED task lifts its deadline (0009 §2); an operator who restarts a parked step of a running task does not extend it — the deadline still stops the task',
    ops: [
      // single, deadline 600 ms: a is refused by an open breaker (parked), the operator retries it.
      { t: 'submit', choice: { shape: 4, run: [0, 100, 2, 2], comp: [0, 100, 1, 0] }, publish: true },
      { t: 'result', pick: 0, outcome: { type: 'circuit_open', effect: 'none', retryAfterMs: 800 }, lag: 0, publish: true },
      { t: 'retry', pick: 0, step: 0, any: false, lag: 0, publish: true },
      { t: 'advance', ms: 40 },
    ],
    expect: async (env) => {
      const { task, rec } = await step(env, 't1', 'a');
      return want('task status, deadlineAt, a status and attempt', [task.view.status, task.view.deadlineAt, rec.status, rec.attempt], ['running', task.view.createdAt + 600, 'processing', 2]);
    },
  },
  {
    name: 'a failed task stops a step in flight that never answered: its effect is unknown',
    why: 'hand-written (decision 0010 revises 0009 §3): agents hold no claim, so a step in flight when its task fails (onFailure: error) may have run — its effect is unknown although no agent ever said it started',
    ops: [
      // fan-in a ∥ b → c, no compensations: a fails permanently while b is in flight.
      { t: 'submit', choice: { shape: 3, ...fast }, publish: true },
      { t: 'result', pick: 0, outcome: { type: 'permanent', effect: 'none' }, lag: 0, publish: true },
    ],
    expect: async (env) => {
      const { task, rec } = await step(env, 't1', 'b');
      return want('task status, b status and effect', [task.view.status, rec.status, rec.effect], ['failed', 'abandoned', 'unknown']);
    },
  },
  {
    name: 'results on another agent type’s subject are forged and change nothing but a count',
    why: 'hand-written (decision 0010): a result for the current attempt of a run or a compensation from another step’s agent, from the same step’s other phase, or from a type no plan names, is FORGED — the store is unchanged but the task’s forgedResults; the real agent’s result is then applied as usual',
    ops: [
      // linear a → b (onFailure error, both compensable): forge a's run three ways, then let a finish.
      { t: 'submit', choice: { shape: 2, ...fast }, publish: true, client: 1 },
      { t: 'forged', pick: 0, by: 'other-step', outcome: { type: 'ok' } },
      { t: 'forged', pick: 0, by: 'other-phase', outcome: { type: 'permanent', effect: 'none' } },
      { t: 'forged', pick: 0, by: 'stranger', outcome: { type: 'circuit_open', effect: 'unknown', retryAfterMs: 50 } },
      { t: 'result', pick: 0, outcome: { type: 'ok' }, lag: 0, publish: true, agent: 2 },
      // b in flight: the task is cancelled, b drains ok, a's compensation runs; forge it.
      { t: 'cancel', pick: 0, lag: 0, publish: true },
      { t: 'result', pick: 0, outcome: { type: 'ok' }, lag: 0, publish: true, agent: 1 },
      { t: 'forged', pick: 0, by: 'other-phase', outcome: { type: 'ok' } },
    ],
    expect: async (env) => {
      const { task, rec } = await step(env, 't1', 'b');
      return want('forgedResults, staleResults, client, b lockedBy, b status', [task.forgedResults, task.staleResults, task.view.client, rec.lockedBy, rec.status], [4, 0, 'client-1', 'agent-1', 'compensating']);
    },
  },
  {
    name: 'a fan-out element that gives up raises an alert naming its step and its element',
    why: 'found by the model (decision 0019 increment 6): the model named the alert of element 0 of ship "ship#0"; the store names step ship with item 0 (the id keeps ship#0: one alert per element). Fixed in the model',
    ops: [
      { t: 'submit', choice: { shape: 12, ...fast, items: 2 }, publish: true, client: 0 },
      { t: 'expire', pick: 0, when: 'due', lag: 0, publish: true },
    ],
  },
  {
    name: 'a fan-out step whose element compensation failed ends the task with that alert when its last compensation ends',
    why: 'found by the model (FC_SEED=13, decision 0019 U6 and 0009 §4): an element compensation gave up while another of the step ran; the store raised its alert then, and the task ended compensation_failed later with no alert raised by that transition. Fixed in the store and the model: the transition that ends the task records one alert per failed element',
    ops: [
      { t: 'submit', choice: { shape: 12, ...fast, items: 3 }, publish: true, client: 0 },
      { t: 'cancel', pick: 0, lag: 0, publish: true },
      { t: 'expire', pick: 0, when: 'due', lag: 0, publish: true },
      { t: 'sweep', publish: true },
      { t: 'expire', pick: 0, when: 'due', lag: 0, publish: true },
      { t: 'advance', ms: 1 },
      { t: 'result', pick: 0, outcome: { type: 'ok' }, lag: 0, publish: true },
    ],
  },
  {
    name: 'an element that fails for good undoes the task: the element in flight drains, then each element that may have taken effect is compensated, two at once',
    why: 'hand-written (decision 0019 R13, U4, U5): a → ship over 3 items (2 at once) → b; element 0 completes and element 2 starts; element 1 (started first) fails permanently with an unknown effect; the undo waits for element 2, then compensates by 0009\'s order, two at once — 2 and 0 (processed, latest first), then 1 (in doubt since its start) — then a',
    ops: [
      { t: 'submit', choice: { shape: 11, ...fast, items: 3 }, publish: true },
      { t: 'result', pick: 0, outcome: { type: 'ok' }, lag: 0, publish: true },
      { t: 'advance', ms: 1 },
      { t: 'result', pick: 0, outcome: { type: 'ok' }, lag: 0, publish: true },
      { t: 'advance', ms: 1 },
      { t: 'result', pick: 0, outcome: { type: 'permanent', effect: 'unknown' }, lag: 0, publish: true },
      { t: 'advance', ms: 1 },
      { t: 'result', pick: 0, outcome: { type: 'ok' }, lag: 0, publish: true },
    ],
    expect: async (env) => {
      const t = await readTask(env.sys, 't1');
      const status = (n: string) => t.elements.get(n)?.status;
      return want('ship, its elements 0 1 2, task', [t.recs.get('ship')?.status, status('ship#0'), status('ship#1'), status('ship#2'), t.view.status], ['compensating', 'compensating', 'failed', 'compensating', 'compensating']);
    },
  },
  {
    name: 'a task id submitted again answers with its status and submitter and changes nothing',
    why: 'hand-written (decision 0010): createTask of an existing id (a redelivery, or another client reusing the id — which the scheduler refuses) returns { created: false, status, client } and writes nothing',
    ops: [
      { t: 'submit', choice: { shape: 0, ...fast }, publish: true, client: 2 },
      { t: 'resubmit', pick: 0, client: 2 },
      { t: 'resubmit', pick: 0, client: 0 },
      { t: 'result', pick: 0, outcome: { type: 'ok' }, lag: 0, publish: true },
      { t: 'resubmit', pick: 0, client: 1 },
    ],
  },
  {
    name: 'a child that completed is undone in its turn when a later step fails, and the parent waits for its notice',
    why: 'hand-written (decision 0019 R14, R15, U7, U8): a → kid (a child task of `kid`) → b; the child completes and its notice completes the step; b fails for good: the undo asks the child to undo (undoChild revives it), its own step is compensated, its notice compensates the parent step, then a is compensated',
    ops: [
      { t: 'submit', choice: { shape: 13, ...fast }, publish: true },
      { t: 'result', pick: 0, outcome: { type: 'ok' }, lag: 0, publish: true },
      { t: 'result', pick: 0, outcome: { type: 'ok' }, lag: 0, publish: true },
      { t: 'sweep', publish: true },
      { t: 'result', pick: 0, outcome: { type: 'permanent', effect: 'none' }, lag: 0, publish: true },
      { t: 'result', pick: 0, outcome: { type: 'ok' }, lag: 0, publish: true },
      { t: 'notice', pick: 0, takeover: 'taken' },
      { t: 'sweep', publish: true },
      { t: 'advance', ms: 5_000 },
      { t: 'sweep', publish: true },
    ],
    expect: async (env) => {
      const parent = await readTask(env.sys, 't1');
      const child = await readTask(env.sys, 't1:kid:1');
      return want('parent, its kid step, the child, its step x', [parent.view.status, parent.recs.get('kid')?.status, child.view.status, child.recs.get('x')?.status], ['compensating', 'compensated', 'compensated', 'compensated']);
    },
  },
  {
    name: 'a child step\'s undo is in the task view (found: shape parent-error, a lost cancel)',
    why: 'counterexample (FC_SEED=11): the task view showed a compensation only for a step that declares one, so a child step being undone had none there while its record had one; the view now shows a child step\'s compensation (agent \'\')',
    ops: [
      { t: 'submit', choice: { shape: 14, ...fast }, publish: true, client: 0 },
      { t: 'cancel', pick: 0, lag: 0, publish: false },
      { t: 'result', pick: 0, outcome: { type: 'ok' }, lag: 0, publish: true, agent: 0 },
    ],
  },
];
