/**
 * @triad/core — Triad's pure logic: definition validation, the plan a task carries, the builder,
 * retry maths and the supervisor's policy. No I/O, so every rule is testable with a fake clock.
 */
export { validateDefinition, definitionProblems, canonicalJson, type ValidateOptions } from './definition.js';
export { compilePlan, idempotencyKey, type PlanStep, type PlanLadder } from './plan.js';
export {
  taskBound,
  stepBound,
  compensationBound,
  phaseBound,
  ladderWorstCaseMs,
  ladderDecisions,
  boundMs,
  formatBound,
  formatMs,
  DEFAULT_SUPERVISION,
  type Bound,
  type Supervision,
  type TaskBound,
} from './bounds.js';
export { fullJitterDelay, DEFAULT_RETRY } from './backoff.js';
export { workflow, WorkflowBuilder } from './builder.js';
