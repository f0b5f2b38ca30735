// The fixed small workflows the model-based test submits, with the ladders a submission chooses, as
// the real definition (compiled by core, as the scheduler does) and as the model's own task spec.
import type { Predicate, WorkflowDefinitionInput } from '@triad/protocol';
import { compilePlan, validateDefinition, type PlanStep } from '@triad/core';
import { defaultGiveUpMs, type PhaseSpec, type TaskSpec } from './model.js';

/** [retries, longBackoffMs, maxFailures, maxCircuitOpen] */
export type LadderChoice = [number, number, number, number];

export interface PlanChoice {
  shape: number;
  run: LadderChoice;
  comp: LadderChoice;
  /** giveUpAfterMs of every run phase, when set (else the ladder's worst case). */
  giveUpMs?: number;
  /** giveUpAfterMs of every compensation phase, when set. */
  compGiveUpMs?: number;
  /** The task input's amount (conditions read it); absent: the input is {}. */
  amount?: number;
  /** The input's remindAt (a sleep reads it), as ms after the submission (or a value that is no time). */
  remindIn?: number | 'soon';
  /** The input's items (a fan-out runs over them): how many, or a value that is no list. */
  items?: number | 'none';
}

/** The task input a submission of `choice` at `now` carries. */
export function taskInput(choice: PlanChoice, now: number): Record<string, unknown> {
  const input: Record<string, unknown> = {};
  if (choice.amount !== undefined) input['amount'] = choice.amount;
  if (choice.remindIn !== undefined) input['remindAt'] = choice.remindIn === 'soon' ? 'soon' : now + choice.remindIn;
  if (choice.items !== undefined) input['items'] = choice.items === 'none' ? 'none' : Array.from({ length: choice.items }, (_, i) => ({ i }));
  return input;
}

/** A sleep step of a shape: a fixed time, or the input's remindAt at most maxMs ahead. */
type ShapeSleep = { ms: number } | { field: 'remindAt'; maxMs: number };

interface Shape {
  name: string;
  steps: { name: string; dependsOn: string[]; compensate: boolean; when?: Predicate; sleep?: ShapeSleep; waitFor?: { signal: string; timeoutMs: number }; forEach?: { maxParallel: number; maxItems: number }; child?: { timeoutMs?: number } }[];
  onFailure: 'error' | 'compensate';
  deadlineMs?: number;
}

export const RUN_BUDGET_MS = 100;
export const COMP_BUDGET_MS = 80;

/** Linear, fan-out/fan-in, with and without compensations, both failure policies, with and without a deadline. */
export const SHAPES: readonly Shape[] = [
  {
    name: 'linear3',
    onFailure: 'compensate',
    steps: [
      { name: 'a', dependsOn: [], compensate: true },
      { name: 'b', dependsOn: ['a'], compensate: false },
      { name: 'c', dependsOn: ['b'], compensate: true },
    ],
  },
  {
    name: 'diamond',
    onFailure: 'compensate',
    deadlineMs: 1_500,
    steps: [
      { name: 'a', dependsOn: [], compensate: true },
      { name: 'b', dependsOn: ['a'], compensate: true },
      { name: 'c', dependsOn: ['a'], compensate: false },
      { name: 'd', dependsOn: ['b', 'c'], compensate: true },
    ],
  },
  {
    name: 'linear2-error',
    onFailure: 'error',
    deadlineMs: 700,
    steps: [
      { name: 'a', dependsOn: [], compensate: true },
      { name: 'b', dependsOn: ['a'], compensate: true },
    ],
  },
  {
    name: 'fanin-error-nocomp',
    onFailure: 'error',
    steps: [
      { name: 'a', dependsOn: [], compensate: false },
      { name: 'b', dependsOn: [], compensate: false },
      { name: 'c', dependsOn: ['a', 'b'], compensate: false },
    ],
  },
  {
    name: 'single',
    onFailure: 'compensate',
    deadlineMs: 600,
    steps: [{ name: 'a', dependsOn: [], compensate: true }],
  },
  {
    name: 'fanout',
    onFailure: 'compensate',
    steps: [
      { name: 'a', dependsOn: [], compensate: false },
      { name: 'b', dependsOn: ['a'], compensate: true },
      { name: 'c', dependsOn: ['a'], compensate: true },
    ],
  },
  // Decision 0019 §9.1: conditions on the input (a skipped step between two that run, its dependents
  // run; never compensated) and on an output (the result op picks a's total), and a root step skipped
  // at creation.
  {
    name: 'when-input',
    onFailure: 'compensate',
    steps: [
      { name: 'a', dependsOn: [], compensate: true },
      { name: 'b', dependsOn: ['a'], compensate: true, when: { input: 'amount', gt: 1000 } },
      { name: 'c', dependsOn: ['b'], compensate: true },
    ],
  },
  {
    name: 'when-output',
    onFailure: 'error',
    deadlineMs: 900,
    steps: [
      { name: 'a', dependsOn: [], compensate: false },
      { name: 'b', dependsOn: ['a'], compensate: true, when: { output: 'a.total', gte: 100 } },
      { name: 'c', dependsOn: ['b'], compensate: false },
      { name: 'd', dependsOn: [], compensate: false, when: { any: [{ input: 'amount', lte: 1000 }, { input: 'amount', exists: false }] } },
    ],
  },
  // Durable sleeps (decision 0019 §9.1): a fixed sleep first (then an undoable step), and a sleep until
  // the input's remindAt — past, future, beyond maxMs or not a time — between two steps, under a task
  // deadline that may stop it; a condition on a sleep.
  {
    name: 'sleep-then',
    onFailure: 'compensate',
    steps: [
      { name: 'nap', dependsOn: [], compensate: false, sleep: { ms: 50 } },
      { name: 'a', dependsOn: ['nap'], compensate: true },
      { name: 'b', dependsOn: ['a'], compensate: false },
    ],
  },
  {
    name: 'sleep-input',
    onFailure: 'error',
    deadlineMs: 1_500,
    steps: [
      { name: 'a', dependsOn: [], compensate: false },
      { name: 'remind', dependsOn: ['a'], compensate: false, sleep: { field: 'remindAt', maxMs: 2_000 }, when: { input: 'amount', ne: 1000 } },
      { name: 'b', dependsOn: ['remind'], compensate: true },
    ],
  },
  // Signals (decision 0019 §9.1): a wait between two undoable steps; signals early, on time, late,
  // repeated or of another name (the signal op); a timeout undoes the task.
  {
    name: 'approve',
    onFailure: 'compensate',
    steps: [
      { name: 'a', dependsOn: [], compensate: true },
      { name: 'approval', dependsOn: ['a'], compensate: false, waitFor: { signal: 'approved', timeoutMs: 1_000 } },
      { name: 'b', dependsOn: ['approval'], compensate: true },
    ],
  },
  // Fan-out (decision 0019 §9.1): forEach over the input's items (0–4 of them, or no list; at most 3),
  // two at once, each element undone on its own; under an undo, and under a failure that abandons.
  {
    name: 'foreach',
    onFailure: 'compensate',
    steps: [
      { name: 'a', dependsOn: [], compensate: true },
      { name: 'ship', dependsOn: ['a'], compensate: true, forEach: { maxParallel: 2, maxItems: 3 } },
      { name: 'b', dependsOn: ['ship'], compensate: false },
    ],
  },
  {
    name: 'foreach-error',
    onFailure: 'error',
    deadlineMs: 1_500,
    steps: [
      { name: 'ship', dependsOn: [], compensate: true, forEach: { maxParallel: 2, maxItems: 4 } },
      { name: 'b', dependsOn: ['ship'], compensate: true },
    ],
  },
  // Child tasks (decision 0019 §9.1): a child of the `kid` workflow between two steps, undone in its
  // turn; and one with a timeout in a task that fails (its child cancelled, its end recorded).
  {
    name: 'parent',
    onFailure: 'compensate',
    steps: [
      { name: 'a', dependsOn: [], compensate: true },
      { name: 'kid', dependsOn: ['a'], compensate: false, child: {} },
      { name: 'b', dependsOn: ['kid'], compensate: false },
    ],
  },
  {
    name: 'parent-error',
    onFailure: 'error',
    steps: [
      { name: 'kid', dependsOn: [], compensate: false, child: { timeoutMs: 1_500 } },
      { name: 'b', dependsOn: [], compensate: true },
    ],
  },
];

/** The workflow the child steps start: one undoable step (its ladders are the parent's submission's). */
export const KID_SHAPE: Shape = { name: 'kid', onFailure: 'compensate', steps: [{ name: 'x', dependsOn: [], compensate: true }] };

/** The agent types of a step's run and compensation: one per phase, so a result on another's subject is forged. */
export const runAgent = (step: string): string => `agent-${step}`;
export const compAgent = (step: string): string => `undo-${step}`;

function ladder(l: LadderChoice) {
  return { retries: Math.min(l[0], l[2]), longBackoffMs: l[1], maxFailures: l[2], maxCircuitOpen: l[3] };
}

export function definition(choice: PlanChoice, shape: Shape = SHAPES[choice.shape % SHAPES.length]!): WorkflowDefinitionInput {
  return {
    name: shape.name,
    onFailure: shape.onFailure,
    ...(shape.deadlineMs !== undefined ? { deadlineMs: shape.deadlineMs } : {}),
    steps: shape.steps.map((s) => {
      const when = s.when ? { when: s.when } : {};
      if (s.sleep) return { name: s.name, dependsOn: s.dependsOn, ...when, sleep: 'ms' in s.sleep ? { ms: s.sleep.ms } : { untilInput: s.sleep.field, maxMs: s.sleep.maxMs } };
      if (s.waitFor) return { name: s.name, dependsOn: s.dependsOn, ...when, waitFor: s.waitFor };
      if (s.child) return { name: s.name, dependsOn: s.dependsOn, ...when, child: { workflow: KID_SHAPE.name, ...(s.child.timeoutMs !== undefined ? { timeoutMs: s.child.timeoutMs } : {}) } };
      return {
      name: s.name,
      agent: runAgent(s.name),
      budgetMs: RUN_BUDGET_MS,
      dependsOn: s.dependsOn,
      ...(s.forEach ? { forEach: 'items', maxParallel: s.forEach.maxParallel, maxItems: s.forEach.maxItems } : {}),
      ...(s.when ? { when: s.when } : {}),
      ladder: ladder(choice.run),
      ...(choice.giveUpMs !== undefined ? { giveUpAfterMs: choice.giveUpMs } : {}),
      ...(s.compensate
        ? {
            compensate: {
              agent: compAgent(s.name),
              budgetMs: COMP_BUDGET_MS,
              ladder: ladder(choice.comp),
              ...(choice.compGiveUpMs !== undefined ? { giveUpAfterMs: choice.compGiveUpMs } : {}),
            },
          }
        : {}),
      };
    }),
  };
}

/** The plan the real scheduler would pin (core's compiler). */
export function realPlan(choice: PlanChoice, shape?: Shape): { plan: PlanStep[]; onFailure: 'error' | 'compensate'; deadlineMs?: number } {
  const def = validateDefinition(definition(choice, shape));
  return { plan: compilePlan(def), onFailure: def.onFailure, ...(def.deadlineMs !== undefined ? { deadlineMs: def.deadlineMs } : {}) };
}

function phase(budgetMs: number, l: LadderChoice, giveUpMs: number | undefined): PhaseSpec {
  const x = ladder(l);
  return {
    budgetMs,
    retries: x.retries,
    longBackoffMs: x.longBackoffMs,
    maxFailures: x.maxFailures,
    maxCircuitOpen: x.maxCircuitOpen,
    giveUpAfterMs: giveUpMs ?? defaultGiveUpMs(budgetMs, x.retries, x.longBackoffMs, x.maxFailures, x.maxCircuitOpen),
  };
}

/** The model's reading of the same definition (defaults from decision 0009, not from core). */
export function modelSpec(choice: PlanChoice, shape: Shape = SHAPES[choice.shape % SHAPES.length]!): TaskSpec {
  const spec: TaskSpec = {
    onFailure: shape.onFailure,
    steps: shape.steps.map((s) => ({
      name: s.name,
      dependsOn: [...s.dependsOn],
      // A sleep or a wait calls no agent: no agent type may answer it.
      agent: s.sleep || s.waitFor || s.child ? '' : runAgent(s.name),
      ...(s.when ? { when: s.when } : {}),
      ...(s.sleep ? { sleep: s.sleep } : {}),
      ...(s.waitFor ? { waitFor: { ...s.waitFor } } : {}),
      ...(s.forEach ? { forEach: { ...s.forEach } } : {}),
      ...(s.child ? { child: { workflow: KID_SHAPE.name, spec: modelSpec(choice, KID_SHAPE), ...(s.child.timeoutMs !== undefined ? { timeoutMs: s.child.timeoutMs } : {}) } } : {}),
      run: phase(RUN_BUDGET_MS, choice.run, choice.giveUpMs),
      ...(s.compensate ? { comp: { ...phase(COMP_BUDGET_MS, choice.comp, choice.compGiveUpMs), agent: compAgent(s.name) } } : {}),
    })),
  };
  if (shape.deadlineMs !== undefined) spec.deadlineMs = shape.deadlineMs;
  return spec;
}
