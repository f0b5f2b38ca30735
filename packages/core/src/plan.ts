/**
 * The plan: the compact form of a pinned definition that a task carries in Redis and the Lua
 * transitions interpret (which steps exist, their agents, budgets, dependencies and failure ladders).
 */
import { LadderSchema, type Ladder, type WorkflowDefinition } from '@triad/protocol';
import { ladderWorstCaseMs } from './bounds.js';

/** A phase's ladder as the Lua reads it: [retries, longBackoffMs, maxFailures, maxCircuitOpen]. */
export type PlanLadder = [number, number, number, number];

export interface PlanStep {
  /** name */
  n: string;
  /** agent */
  a: string;
  /** complete-by budget, ms */
  b: number;
  /** dependsOn */
  d: string[];
  /** needs: the steps whose outputs the request carries */
  nd: string[];
  /** the supervisor's failure ladder */
  l: PlanLadder;
  /** give up this long after the first start, across attempts and parks (ms) */
  g: number;
  /** the step's compensation, if it has one: agent, budget, ladder, give-up */
  c?: { a: string; b: number; l: PlanLadder; g: number };
}

const DEFAULT_LADDER = LadderSchema.parse({});

function planLadder(l: Ladder): PlanLadder {
  return [l.retries, l.longBackoffMs, l.maxFailures, l.maxCircuitOpen];
}

export function compilePlan(def: WorkflowDefinition): PlanStep[] {
  return def.steps.map((s) => {
    const ladder = s.ladder ?? def.defaults.ladder ?? DEFAULT_LADDER;
    const step: PlanStep = {
      n: s.name,
      a: s.agent,
      b: s.budgetMs,
      d: [...s.dependsOn],
      nd: [...s.needs],
      l: planLadder(ladder),
      g: s.giveUpAfterMs ?? ladderWorstCaseMs(s.budgetMs, ladder),
    };
    if (s.compensate) {
      const cl = s.compensate.ladder ?? ladder;
      step.c = { a: s.compensate.agent, b: s.compensate.budgetMs, l: planLadder(cl), g: s.compensate.giveUpAfterMs ?? ladderWorstCaseMs(s.compensate.budgetMs, cl) };
    }
    return step;
  });
}

/**
 * The idempotency key of a step: stable across attempts, distinct per namespace, task, step and kind.
 * "/" separates the parts because no namespace, task id or step name may contain it, so no two
 * (task, step, kind) share a key (task ids may contain ":").
 */
export function idempotencyKey(namespace: string, taskId: string, step: string, kind: 'run' | 'compensate'): string {
  return kind === 'run' ? `${namespace}/${taskId}/${step}` : `${namespace}/${taskId}/${step}/compensate`;
}
