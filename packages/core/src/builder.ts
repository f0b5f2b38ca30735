/**
 * A typed builder that produces the same definition document as hand-written JSON.
 *
 * @example
 *   const orders = workflow('orders')
 *     .step('reserve', { agent: 'inventory', budgetMs: 5_000 })
 *     .sleep('cool-off', { ms: 3_000 })
 *     .waitFor('approval', { signal: 'approved', timeoutMs: 60_000 }, { dependsOn: ['reserve', 'cool-off'], when: { input: 'amount', gt: 1000 } })
 *     .step('ship', { agent: 'shipping', dependsOn: ['approval'], needs: ['reserve'], forEach: 'items', maxParallel: 2 })
 *     .build();
 */
import type { ChildSchema, Scalar, SleepSchema, StepDefinitionInput, WaitForSchema, WorkflowDefinition, WorkflowDefinitionInput, FailurePolicy } from '@triad/protocol';
import type { z } from 'zod';
import { validateDefinition, type ValidateOptions } from './definition.js';

/** A step's output, or a path into it: the step must be one added before (the types enforce it). */
export type OutputRef<Known extends string> = Known | `${Known}.${string}`;

type Operators = { eq?: Scalar; ne?: Scalar; gt?: number | string; gte?: number | string; lt?: number | string; lte?: number | string; in?: Scalar[]; exists?: boolean };

/** A `when` condition whose output references name earlier steps. */
export type TypedPredicate<Known extends string> =
  | (({ input: string; output?: never } | { output: OutputRef<Known>; input?: never }) & Operators)
  | { all: TypedPredicate<Known>[] }
  | { any: TypedPredicate<Known>[] };

/** Where a list or a child input comes from: an input path, or an earlier step's output. */
export type TypedValueRef<Known extends string> = string | { input: string } | { output: OutputRef<Known> };

type StepOptions<Known extends string> = Omit<StepDefinitionInput, 'name' | 'agent' | 'dependsOn' | 'needs' | 'when' | 'forEach' | 'sleep' | 'waitFor' | 'child'> & {
  agent: string;
  dependsOn?: Known[];
  needs?: Known[];
  when?: TypedPredicate<Known>;
  forEach?: TypedValueRef<Known>;
};

/** What every kind of step may say besides its own field: what it waits for, and when it runs. */
export interface KindOptions<Known extends string> {
  dependsOn?: Known[];
  when?: TypedPredicate<Known>;
}

type ChildInput<Known extends string> = Omit<z.input<typeof ChildSchema>, 'input'> & { input?: TypedValueRef<Known> };

export class WorkflowBuilder<Known extends string = never> {
  private readonly doc: WorkflowDefinitionInput & { steps: StepDefinitionInput[] };

  constructor(name: string) {
    this.doc = { name, steps: [] };
  }

  version(v: number): this {
    this.doc.version = v;
    return this;
  }

  description(text: string): this {
    this.doc.description = text;
    return this;
  }

  onFailure(policy: FailurePolicy): this {
    this.doc.onFailure = policy;
    return this;
  }

  defaults(d: NonNullable<WorkflowDefinitionInput['defaults']>): this {
    this.doc.defaults = d;
    return this;
  }

  /** Adds an agent call; dependencies, needs and output references may only name steps added before (the types enforce it). */
  step<N extends string>(name: N, options: StepOptions<Known>): WorkflowBuilder<Known | N> {
    return this.add(name, options);
  }

  /** A durable sleep: `{ ms }`, or `{ untilInput: "<path>", maxMs? }` (epoch ms read from the task input). */
  sleep<N extends string>(name: N, sleep: z.input<typeof SleepSchema>, options: KindOptions<Known> = {}): WorkflowBuilder<Known | N> {
    return this.add(name, { ...options, sleep });
  }

  /** A wait for a named signal (its data becomes the step's output); on timeout the step fails. */
  waitFor<N extends string>(name: N, waitFor: z.input<typeof WaitForSchema>, options: KindOptions<Known> = {}): WorkflowBuilder<Known | N> {
    return this.add(name, { ...options, waitFor });
  }

  /** A task of another registered workflow; the step ends with its outcome (its output when it completes). */
  child<N extends string>(name: N, child: ChildInput<Known>, options: KindOptions<Known> = {}): WorkflowBuilder<Known | N> {
    return this.add(name, { ...options, child });
  }

  private add<N extends string>(name: N, fields: object): WorkflowBuilder<Known | N> {
    this.doc.steps.push({ name, ...fields });
    // The document is the same object; only the set of known step names (a type) grows.
    return this;
  }

  /** The raw document (what is sent over the wire). */
  toJSON(): WorkflowDefinitionInput {
    return structuredClone(this.doc);
  }

  /** Validates and returns the definition; throws TriadError INVALID_DEFINITION listing every problem. */
  build(options?: ValidateOptions): WorkflowDefinition {
    return validateDefinition(this.toJSON(), options);
  }
}

export function workflow(name: string): WorkflowBuilder {
  return new WorkflowBuilder(name);
}
