/**
 * The wire form of a workflow definition: a versioned document of steps. Shape only; the semantic
 * checks that need the whole graph (unknown dependency, cycle, needs outside the ancestors, one kind per
 * step) live in @triad/core's `validateDefinition`, which lists every problem at once.
 */
import { z } from 'zod';
import { NAME_PATTERN } from './constants.js';
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

// ---- Steps that wait and branch (decision 0019 §1) ----

/** A fan-out step runs at most this many elements (maxItems); documented, not a setting (0019). */
export const MAX_FOREACH_ITEMS = 1000;
/** maxItems when a forEach step does not say. */
export const DEFAULT_MAX_ITEMS = 100;
/** maxParallel when a forEach step does not say: min(this, maxItems). */
export const DEFAULT_MAX_PARALLEL = 10;
/** The most leaf conditions a `when` may hold, and how deep all/any may nest. */
export const MAX_PREDICATE_CONDITIONS = 32;
export const MAX_PREDICATE_DEPTH = 4;
/** The longest sleep, wait or child timeout, and a `sleep.untilInput`'s default maxMs. */
export const MAX_WAIT_MS = 30 * DAY;

/** "items", "customer.address.zip", "items.0.sku": 1–8 segments of 1–64 characters, no "." or whitespace. */
export const PathSchema = z
  .string()
  .regex(/^[^.\s]{1,64}(\.[^.\s]{1,64}){0,7}$/, 'a path is 1-8 segments separated by "." (e.g. "items", "customer.zip", "items.0.sku")');

const STEP_NAME = NAME_PATTERN.source.slice(1, -1);
/** "<step>" or "<step>.<path>": the first segment names a step. */
export const OutputPathSchema = z
  .string()
  .regex(new RegExp(`^${STEP_NAME}(\\.[^.\\s]{1,64}){0,7}$`), 'an output reference is "<step>" or "<step>.<path>" (e.g. "score.risk")');

/** Where a value comes from: "<path>" or { input: "<path>" } = the task input; { output: "<step>[.<path>]" } = a step's output. */
export const ValueRefSchema = z.union([PathSchema, z.object({ input: PathSchema }).strict(), z.object({ output: OutputPathSchema }).strict()]);
export type ValueRef = z.output<typeof ValueRefSchema>;

/** A value a condition compares with (JSON scalars). */
export const ScalarSchema = z.union([z.string().max(1000), z.number(), z.boolean(), z.null()]);
export type Scalar = z.output<typeof ScalarSchema>;
const Ordered = z.union([z.number(), z.string().max(1000)]);

/** The sources and the operators of a condition; a leaf names exactly one of each. */
export const PREDICATE_SOURCES = ['input', 'output'] as const;
export const PREDICATE_OPERATORS = ['eq', 'ne', 'gt', 'gte', 'lt', 'lte', 'in', 'exists'] as const;
export type PredicateOperator = (typeof PREDICATE_OPERATORS)[number];

export const PredicateLeafSchema = z
  .object({
    input: PathSchema.optional(),
    output: OutputPathSchema.optional(),
    eq: ScalarSchema.optional(),
    ne: ScalarSchema.optional(),
    gt: Ordered.optional(),
    gte: Ordered.optional(),
    lt: Ordered.optional(),
    lte: Ordered.optional(),
    in: z.array(ScalarSchema).min(1).max(100).optional(),
    exists: z.boolean().optional(),
  })
  .strict()
  .superRefine((leaf, ctx) => {
    const has = (k: string): boolean => (leaf as Record<string, unknown>)[k] !== undefined;
    const sources = PREDICATE_SOURCES.filter(has).length;
    const operators = PREDICATE_OPERATORS.filter(has).length;
    if (sources !== 1 || operators !== 1) {
      ctx.addIssue({ code: 'custom', message: `a condition names one of ${PREDICATE_SOURCES.join(' or ')} and exactly one of ${PREDICATE_OPERATORS.join(' ')}` });
    }
  });
export type PredicateLeaf = z.output<typeof PredicateLeafSchema>;
/** A declarative condition (no code is evaluated): a leaf, or all / any of several. */
export type Predicate = PredicateLeaf | { all: Predicate[] } | { any: Predicate[] };

export const PredicateSchema: z.ZodType<Predicate, Predicate> = z
  .lazy(() =>
    z.union([
      PredicateLeafSchema,
      z.object({ all: z.array(PredicateSchema).min(1).max(16) }).strict(),
      z.object({ any: z.array(PredicateSchema).min(1).max(16) }).strict(),
    ]),
  )
  // Named in the JSON Schemas ($defs/predicate), where it refers to itself.
  .meta({ id: 'predicate', description: 'a condition: { input | output, one of eq ne gt gte lt lte in exists }, or { all: [...] } or { any: [...] }' });

/** A durable sleep: a fixed time, or until the epoch ms a task input field holds (at most maxMs ahead). */
export const SleepSchema = z.union([
  z.object({ ms: durationMs('sleep.ms', MAX_WAIT_MS) }).strict(),
  z.object({ untilInput: PathSchema, maxMs: durationMs('sleep.maxMs', MAX_WAIT_MS).default(MAX_WAIT_MS) }).strict(),
]);
export type Sleep = z.output<typeof SleepSchema>;

/** A wait for a named signal; on timeout the step fails and the workflow's failure policy applies. */
export const WaitForSchema = z.object({ signal: NameSchema, timeoutMs: durationMs('waitFor.timeoutMs', MAX_WAIT_MS) }).strict();
export type WaitFor = z.output<typeof WaitForSchema>;

/** A task of another registered workflow; the step ends with its outcome. */
export const ChildSchema = z
  .object({
    workflow: NameSchema,
    /** Pin a version; the latest when the child starts if absent. */
    version: z.number().int().min(1).optional(),
    /** The child's input; absent: the parent's whole input. */
    input: ValueRefSchema.optional(),
    /** Cancel the child (and fail the step) if it has not ended this long after it started. */
    timeoutMs: durationMs('child.timeoutMs', MAX_WAIT_MS).optional(),
  })
  .strict();
export type Child = z.output<typeof ChildSchema>;

/**
 * A step does one thing — calls an agent (`agent`, optionally once per element of a list: `forEach`),
 * sleeps (`sleep`), waits for a signal (`waitFor`) or starts a child task (`child`) — and any step may
 * run only when a condition holds (`when`, else it is skipped). Exactly one kind per step is a rule of
 * `validateDefinition`, which says so with the step's name rather than as a union error.
 */
export const StepDefinitionSchema = z
  .object({
    name: NameSchema,
    agent: NameSchema.optional(),
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
    /** Run only when this holds; otherwise the step ends `skipped` and its dependents run. */
    when: PredicateSchema.optional(),
    sleep: SleepSchema.optional(),
    waitFor: WaitForSchema.optional(),
    child: ChildSchema.optional(),
    /** With `agent`: run once per element of this list (a path into the input or a needed step's output). */
    forEach: ValueRefSchema.optional(),
    /** With forEach: more elements fail the step (default 100). */
    maxItems: z.number().int().min(1).max(MAX_FOREACH_ITEMS).optional(),
    /** With forEach: elements in flight at once (default min(10, maxItems)). */
    maxParallel: z.number().int().min(1).max(MAX_FOREACH_ITEMS).optional(),
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
