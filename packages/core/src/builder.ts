/**
 * A typed builder that produces the same definition document as hand-written JSON.
 *
 * @example
 *   const orders = workflow('orders')
 *     .step('reserve', { agent: 'inventory', budgetMs: 5_000 })
 *     .step('charge', { agent: 'payment', dependsOn: ['reserve'], needs: ['reserve'] })
 *     .build();
 */
import type { StepDefinitionInput, WorkflowDefinition, WorkflowDefinitionInput, FailurePolicy } from '@triad/protocol';
import { validateDefinition, type ValidateOptions } from './definition.js';

type StepOptions<Known extends string> = Omit<StepDefinitionInput, 'name' | 'dependsOn' | 'needs'> & {
  dependsOn?: Known[];
  needs?: Known[];
};

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

  /** Adds a step; dependencies and needs may only name steps added before (the types enforce it). */
  step<N extends string>(name: N, options: StepOptions<Known>): WorkflowBuilder<Known | N> {
    this.doc.steps.push({ name, ...options });
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
