/**
 * @triad/core — Triad's pure logic: definition validation, the plan a task carries, the builder,
 * retry maths and the supervisor's policy. No I/O, so every rule is testable with a fake clock.
 */
export { validateDefinition, definitionProblems, canonicalJson, type ValidateOptions } from './definition.js';
export { compilePlan, idempotencyKey, type PlanStep } from './plan.js';
export { fullJitterDelay, DEFAULT_RETRY } from './backoff.js';
export { workflow, WorkflowBuilder } from './builder.js';
