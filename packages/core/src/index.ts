/**
 * @triad/core — Triad's pure logic: definition validation, the plan a task carries, the builder,
 * retry maths, bounds, the reference evaluator of conditions and the supervisor's policy. No I/O, so
 * every rule is testable with a fake clock.
 */
export { validateDefinition, definitionProblems, canonicalJson, type ValidateOptions } from './definition.js';
export { compilePlan, idempotencyKey, type PlanStep, type PlanLadder } from './plan.js';
export { stepKind, stepFeatures, unsupportedFeatures, childReferences, childResolver, MAX_CHILD_LOOKUPS, STEP_KINDS, STEP_FEATURES, type StepKindName, type StepFeature } from './kinds.js';
export { compilePredicate, describePredicate, predicateSize, predicateOutputs, type PlanPredicate } from './predicate.js';
export { evaluate, resolve, render, formatNumber, cutUtf8, MAX_REASON_BYTES, MAX_SHOWN_STRING_BYTES, type Evaluation } from './evaluate.js';
export { valueReference, inputReference, outputReference, referenceText, type Reference } from './references.js';
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
  fanOutWaves,
  DEFAULT_SUPERVISION,
  type ChildResolver,
  type Bound,
  type Supervision,
  type TaskBound,
} from './bounds.js';
export { fullJitterDelay, DEFAULT_RETRY } from './backoff.js';
export { workflow, WorkflowBuilder, type OutputRef, type TypedPredicate, type TypedValueRef, type KindOptions } from './builder.js';
export { MAX_EVERY_MS, MAX_TICKS_AT_ONCE, MIN_EVERY_MS, cronProblems, dueTicks, nextTick, parseEvery, type DueTicks, type ScheduleTiming } from './schedule.js';
