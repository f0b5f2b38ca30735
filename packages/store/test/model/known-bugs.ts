// Disagreements between the store (its Lua transitions, and TaskStore) and the decisions that the
// model-based test found and that are the store's to fix (the lead engineer owns it). Until a bug is
// fixed, the random test steers clear of the situation that shows it (ops.ts reads `avoid`) and its
// replay stays out of `npm test`. Run them with FC_KNOWN_BUGS=1: the random test then stops avoiding
// them and each replay below runs — and fails until the fix. After a fix: move the replay into
// regressions.ts, and delete its entry here (the steering in ops.ts goes with its id).
import type { Op } from './ops.js';

export type KnownBugId = 'duplicate-of-reported-result' | 'in-flight-resends-reported-compensation' | 'retry-of-abandoned-step-leaves-failed-step';

export interface KnownBug {
  id: KnownBugId;
  /** Where the store goes wrong, what it does, and what the decisions say it should do. */
  where: string;
  ops: Op[];
}

const ladder = { run: [1, 100, 2, 1] as [number, number, number, number], comp: [0, 100, 1, 0] as [number, number, number, number] };

export const KNOWN_BUGS: KnownBug[] = [
  {
    id: 'duplicate-of-reported-result',
    where:
      'lua/applyResult.lua, the fencing (lines 58 and 63) accepts a result for an attempt that already reported a retryable or circuit-open failure (rec.reported / rec.comp.reported): a redelivered duplicate is applied again — completeBy moves to the later now, circuitCount grows again, a second step_failed event — instead of being STALE as decision 0001 says of "a duplicate delivery" (the attempt is over; the supervisor decides the next). Fix: also reject when the phase is reported.',
    ops: [
      { t: 'submit', choice: { shape: 4, ...ladder }, publish: true },
      { t: 'result', pick: 0, outcome: { type: 'retryable', effect: 'none' }, lag: 0, publish: true },
      { t: 'advance', ms: 40 },
      { t: 'duplicate', pick: 0 },
    ],
  },
  {
    id: 'in-flight-resends-reported-compensation',
    where:
      'src/task-store.ts inFlight (line 187) re-sends a compensation whose attempt already reported a retryable failure (rec.comp.reported), while it rightly skips a run that reported (line 196: "not in flight, the supervisor decides its next attempt"); the agent then runs the same compensation attempt again. Fix: skip rec.comp.reported too.',
    ops: [
      // linear a → b: a done, b reports a failure, the cancel abandons b and compensates a.
      { t: 'submit', choice: { shape: 2, ...ladder }, publish: true },
      { t: 'result', pick: 0, outcome: { type: 'ok' }, lag: 0, publish: true },
      { t: 'result', pick: 0, outcome: { type: 'retryable', effect: 'none' }, lag: 0, publish: true },
      { t: 'cancel', pick: 0, lag: 0, publish: true },
      { t: 'result', pick: 0, outcome: { type: 'retryable', effect: 'unknown' }, lag: 0, publish: true },
      { t: 'resend', pick: 0 },
    ],
  },
  {
    id: 'retry-of-abandoned-step-leaves-failed-step',
    where:
      'lua/retryStep.lua (lines 53 and 80): an operator retry that names a step abandoned when its task failed restarts that step and the other abandoned ones but not the step that failed the task (still failed/error); the task is running again, can never complete (a step that depends on the failed one never starts) and, once the restarted steps finish, has no member in the deadline index — nothing ever moves it on (decision 0009 invariant "a non-terminal task has a member in the deadline index"; invariant 1, no task is lost). Fix: a run retry of a failed task also restarts its failed/error step (or refuses to name an abandoned step while one is failed).',
    ops: [
      { t: 'submit', choice: { shape: 3, run: [0, 100, 1, 0], comp: [0, 100, 1, 0] }, publish: true },
      { t: 'result', pick: 0, outcome: { type: 'permanent', effect: 'none' }, lag: 0, publish: true },
      { t: 'retry', pick: 0, step: 1, any: false, lag: 0, publish: true },
      { t: 'result', pick: 0, outcome: { type: 'ok' }, lag: 0, publish: true },
    ],
  },
];

/** FC_KNOWN_BUGS=1: exercise the known bugs (the random test no longer avoids them; their replays run). */
export const EXERCISE_KNOWN_BUGS = process.env['FC_KNOWN_BUGS'] === '1';

/** The situations the random operations steer clear of. */
export function avoided(): Set<KnownBugId> {
  return new Set(EXERCISE_KNOWN_BUGS ? [] : KNOWN_BUGS.map((b) => b.id));
}
