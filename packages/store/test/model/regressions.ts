// Cases the model-based test must keep passing, replayed operation by operation (exactly as written,
// even where the random runs steer clear of a known bug) and followed by the calm phase, in every
// `npm test`: shrunk counterexamples it found, and hand-written sequences for situations the random
// runs reach only rarely.
import type { Op } from './ops.js';

export interface Regression {
  name: string;
  /** What it covers; for a found counterexample, what went wrong and what was fixed (the model or the store). */
  why: string;
  ops: Op[];
}

const fast: { run: [number, number, number, number]; comp: [number, number, number, number] } = { run: [0, 100, 1, 0], comp: [0, 100, 1, 0] };

export const REGRESSIONS: Regression[] = [
  {
    name: 'two in-doubt steps that started in the same millisecond',
    why: 'hand-written: fan-out b ∥ c both claimed, the task cancelled, both expire in the drain (effect unknown, same start time): their compensations are tied in the undo order, which decision 0009 leaves open; either may go first, then the other, then the task is cancelled',
    ops: [
      { t: 'submit', choice: { shape: 5, ...fast }, publish: true },
      { t: 'result', pick: 0, outcome: { type: 'ok' }, lag: 0, publish: true },
      { t: 'claim', pick: 0, stale: false },
      { t: 'claim', pick: 1, stale: false },
      { t: 'cancel', pick: 0, lag: 0, publish: true },
      { t: 'expire', pick: 0, when: 'due', lag: 0, publish: true },
      { t: 'expire', pick: 0, when: 'due', lag: 0, publish: true },
    ],
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
    name: 'the same alert raised twice in one millisecond is one outbox entry',
    why: 'found (FC_SEED=205, 206; 201, 202 with a retryable failure): a step fails permanently, the operator retries it at once and it fails again with the same failureCount — the same alert id and time; the outbox (a set of alert JSON) holds it once, which is what decision 0009 §4 needs (publishing deduplicates by alert id); the model kept a list (the model was wrong)',
    ops: [
      { t: 'submit', choice: { shape: 2, ...fast }, publish: true },
      { t: 'result', pick: 0, outcome: { type: 'permanent', effect: 'none' }, lag: 0, publish: true },
      { t: 'retry', pick: 0, step: null, any: false, lag: 0, publish: true },
      { t: 'result', pick: 0, outcome: { type: 'permanent', effect: 'none' }, lag: 0, publish: true },
      { t: 'publishAlerts' },
    ],
  },
];
