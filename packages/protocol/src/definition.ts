/**
 * The wire form of a workflow definition: a versioned document of steps. Shape only; the semantic
 * checks that need the whole graph (unknown dependency, cycle, needs outside the ancestors) live in
 * @triad/core's `validateDefinition`, which lists every problem at once.
 */
import { z } from 'zod';
import { NameSchema } from './names.js';

const durationMs = (what: string, max: number) =>
  z
    .number({ error: `${what} must be a number of milliseconds` })
    .int(`${what} must be a whole number of milliseconds`)
    .min(1, `${what} must be at least 1 ms`)
    .max(max, `${what} must be at most ${max} ms`);

const DAY = 86_400_000;

/** Agent-side retry inside one complete-by window: exponential back-off with full jitter. */
export const RetryPolicySchema = z
  .object({
    maxAttempts: z.number().int().min(1).max(100).default(3),
    initialDelayMs: durationMs('retry.initialDelayMs', 60_000).default(100),
    maxDelayMs: durationMs('retry.maxDelayMs', 600_000).default(5_000),
  })
  .strict();
export type RetryPolicy = z.output<typeof RetryPolicySchema>;

/**
 * The supervisor's failure ladder for a step whose complete-by passed: retry at once while
 * failureCount <= retries, then wait `longBackoffMs` between tries, and give up after `maxFailures`.
 * An attempt the agent's open circuit breaker refused counts only past `maxCircuitOpen` such attempts,
 * so a breaker that stays open still ends the step (decision 0009).
 */
export const LadderSchema = z
  .object({
    retries: z.number().int().min(0).max(1000).default(3),
    longBackoffMs: durationMs('ladder.longBackoffMs', 7 * DAY).default(30_000),
    maxFailures: z.number().int().min(1).max(10_000).default(6),
    maxCircuitOpen: z.number().int().min(0).max(10_000).default(10),
  })
  .strict();
export type Ladder = z.output<typeof LadderSchema>;
export type LadderInput = z.input<typeof LadderSchema>;

export const CompensationSchema = z
  .object({
    agent: NameSchema,
    budgetMs: durationMs('compensate.budgetMs', 7 * DAY).default(10_000),
    retry: RetryPolicySchema.optional(),
    ladder: LadderSchema.optional(),
    /**
     * The most time the compensation may take across all its attempts and parks, from its first start;
     * then it gives up (schedule-to-close). Default: the ladder's own worst case (decision 0009).
     */
    giveUpAfterMs: durationMs('compensate.giveUpAfterMs', 30 * DAY).optional(),
  })
  .strict();
export type Compensation = z.output<typeof CompensationSchema>;

export const StepDefinitionSchema = z
  .object({
    name: NameSchema,
    agent: NameSchema,
    /** The complete-by budget: completeBy = start + budgetMs. */
    budgetMs: durationMs('budgetMs', 7 * DAY).default(10_000),
    /** Steps that must be processed before this one starts. */
    dependsOn: z.array(NameSchema).max(256).default([]),
    /** Steps whose outputs this step's handler receives; each must be one it (transitively) depends on. */
    needs: z.array(NameSchema).max(256).default([]),
    retry: RetryPolicySchema.optional(),
    ladder: LadderSchema.optional(),
    /**
     * The most time the step may take across all its attempts and parks, from its first start; then it
     * gives up (schedule-to-close). Default: the ladder's own worst case (decision 0009).
     */
    giveUpAfterMs: durationMs('giveUpAfterMs', 30 * DAY).optional(),
    /** How to undo this step's effect. A step without one declares it has nothing to undo. */
    compensate: CompensationSchema.optional(),
  })
  .strict();
export type StepDefinition = z.output<typeof StepDefinitionSchema>;
export type StepDefinitionInput = z.input<typeof StepDefinitionSchema>;

export const FailurePolicySchema = z.enum(['error', 'compensate']);
export type FailurePolicy = z.output<typeof FailurePolicySchema>;

export const WorkflowDefinitionSchema = z
  .object({
    name: NameSchema,
    /** Assigned at registration when absent: the next version after the latest. */
    version: z.number().int().min(1).optional(),
    description: z.string().max(2000).optional(),
    steps: z.array(StepDefinitionSchema).min(1, 'a workflow needs at least one step').max(256),
    onFailure: FailurePolicySchema.default('error'),
    /**
     * The longest a task may run before it is stopped as if its running step had given up (undone with
     * onFailure: compensate, else failed with a task_deadline alert). None by default: every step's
     * ladder is bounded anyway (decision 0009).
     */
    deadlineMs: durationMs('deadlineMs', 30 * DAY).optional(),
    /** Defaults for every step that does not set its own. */
    defaults: z
      .object({ retry: RetryPolicySchema.optional(), ladder: LadderSchema.optional() })
      .strict()
      .default({}),
  })
  .strict();
export type WorkflowDefinition = z.output<typeof WorkflowDefinitionSchema>;
export type WorkflowDefinitionInput = z.input<typeof WorkflowDefinitionSchema>;

/** A definition as stored: the version is always set. */
export type RegisteredWorkflow = WorkflowDefinition & { version: number; registeredAt: number };
