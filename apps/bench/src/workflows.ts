/** The workflows the benchmark runs: chains of sequential steps on one bench agent. */
import type { WorkflowDefinitionInput } from '@triad/protocol';

/**
 * `steps` sequential steps on `agent`. The budget is generous for the load tests: with thousands of
 * tasks queued at once a short complete-by would expire steps that are merely waiting their turn, and
 * the run would measure supervisor retries instead of throughput.
 */
export function chain(name: string, agent: string, steps: number, budgetMs: number): WorkflowDefinitionInput {
  if (steps < 1) throw new Error('a workflow needs at least one step');
  return {
    name,
    description: `benchmark: ${steps} sequential ${agent} steps`,
    steps: Array.from({ length: steps }, (_, i) => ({ name: `s${i + 1}`, agent, budgetMs, dependsOn: i === 0 ? [] : [`s${i}`] })),
  };
}

export const LOAD_BUDGET_MS = 120_000;

export const noopWorkflow = (steps: number): WorkflowDefinitionInput => chain(`bench-noop-${steps}`, 'noop', steps, LOAD_BUDGET_MS);
export const ioWorkflow = (steps: number): WorkflowDefinitionInput => chain(`bench-io-${steps}`, 'io10', steps, LOAD_BUDGET_MS);
/** One step whose budget is the complete-by the recovery bound is measured against. */
export const stallWorkflow = (budgetMs: number): WorkflowDefinitionInput => chain('bench-stall', 'stall', 1, budgetMs);
