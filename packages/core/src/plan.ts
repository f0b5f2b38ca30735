/**
 * The plan: the compact form of a pinned definition that a task carries in Redis and the Lua
 * transitions interpret (which steps exist, their agents, budgets and dependencies).
 */
import { LadderSchema, type WorkflowDefinition } from '@triad/protocol';

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
  /** the supervisor's failure ladder: [retries, longBackoffMs, maxFailures] */
  l: [number, number, number];
  /** the step's compensation, if it has one: agent, budget, ladder */
  c?: { a: string; b: number; l: [number, number, number] };
}

const DEFAULT_LADDER = LadderSchema.parse({});

export function compilePlan(def: WorkflowDefinition): PlanStep[] {
  return def.steps.map((s) => {
    const ladder = s.ladder ?? def.defaults.ladder ?? DEFAULT_LADDER;
    const step: PlanStep = { n: s.name, a: s.agent, b: s.budgetMs, d: [...s.dependsOn], nd: [...s.needs], l: [ladder.retries, ladder.longBackoffMs, ladder.maxFailures] };
    if (s.compensate) {
      const cl = s.compensate.ladder ?? ladder;
      step.c = { a: s.compensate.agent, b: s.compensate.budgetMs, l: [cl.retries, cl.longBackoffMs, cl.maxFailures] };
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
