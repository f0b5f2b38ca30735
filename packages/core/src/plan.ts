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
}

const DEFAULT_LADDER = LadderSchema.parse({});

export function compilePlan(def: WorkflowDefinition): PlanStep[] {
  return def.steps.map((s) => {
    const ladder = s.ladder ?? def.defaults.ladder ?? DEFAULT_LADDER;
    return { n: s.name, a: s.agent, b: s.budgetMs, d: [...s.dependsOn], nd: [...s.needs], l: [ladder.retries, ladder.longBackoffMs, ladder.maxFailures] };
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
