// The chaos run's workflow: the example's `orders` with short budgets and a short ladder, so that every
// task's bound (and so a whole run) fits in minutes. Its shape and its compensations are the example's own.
import { taskBound, validateDefinition, type Supervision, type TaskBound } from '@triad/core';
import { ordersWorkflow } from '@triad/example-orders';
import type { LadderInput, RetryPolicy, WorkflowDefinition, WorkflowDefinitionInput } from '@triad/protocol';

/** Step and compensation budget: long enough for a slow service (the faults go up to 1.3 s) to answer in time. */
export const CHAOS_BUDGET_MS = 1_500;
export const CHAOS_RETRY: RetryPolicy = { maxAttempts: 3, initialDelayMs: 50, maxDelayMs: 250 };
/** One immediate retry, then 0.5 s parks; three counted failures or two circuit-open parks end a phase. */
export const CHAOS_LADDER: Required<LadderInput> = { retries: 1, longBackoffMs: 500, maxFailures: 3, maxCircuitOpen: 2 };

/**
 * Decision 0019's waiting steps in the chaos run: after reserve ∥ fraud the order cools off (a durable
 * sleep), then an order over CHAOS_APPROVAL_OVER waits for the signal `approved` (sent by the run for
 * most of them, at a random moment: before the wait too) and is undone when it does not come in time.
 */
export const CHAOS_APPROVAL_OVER = 400;
export const CHAOS_SIGNAL = 'approved';
export const CHAOS_COOL_OFF_MS = 200;
export const CHAOS_APPROVAL_TIMEOUT_MS = 3_000;

/** The supervisors' tunables in a chaos run (their TRIAD_SUPERVISOR_* environment), and so the bounds'. */
export const CHAOS_SUPERVISION: Supervision = { sweepIntervalMs: 250, leaderLeaseMs: 2_000 };

/**
 * `ordersWorkflow` with every budget set to CHAOS_BUDGET_MS and CHAOS_RETRY / CHAOS_LADDER as defaults.
 * It refuses to build if the example stopped undoing its effects (onFailure 'compensate', a compensation
 * on reserve, charge and ship): without them the run could not see an orphan effect at all.
 */
export function chaosOrdersWorkflow(): WorkflowDefinitionInput {
  const base = ordersWorkflow.toJSON();
  const doc: WorkflowDefinitionInput = {
    ...base,
    description: `chaos variant of the example's orders workflow: budgets ${CHAOS_BUDGET_MS} ms, ladder ${JSON.stringify(CHAOS_LADDER)}`,
    defaults: { retry: CHAOS_RETRY, ladder: CHAOS_LADDER },
    steps: [
      ...base.steps.map((s) =>
        s.waitFor
          ? // The example's approval, sooner: after a cool-off, over a lower amount, with a short timeout.
            { ...s, when: { input: 'amount', gt: CHAOS_APPROVAL_OVER }, waitFor: { signal: CHAOS_SIGNAL, timeoutMs: CHAOS_APPROVAL_TIMEOUT_MS }, dependsOn: ['cool-off'] }
          : {
              ...s,
              budgetMs: CHAOS_BUDGET_MS,
              ...(s.compensate ? { compensate: { ...s.compensate, budgetMs: CHAOS_BUDGET_MS } } : {}),
            },
      ),
      { name: 'cool-off', sleep: { ms: CHAOS_COOL_OFF_MS }, dependsOn: ['reserve', 'fraud'] },
    ],
  };
  const problems: string[] = [];
  if (doc.onFailure !== 'compensate') problems.push(`onFailure is ${JSON.stringify(doc.onFailure)}, not 'compensate'`);
  const approval = base.steps.find((s) => s.name === 'approval');
  if (!approval?.waitFor || !approval.dependsOn?.includes('reserve') || !approval.dependsOn.includes('fraud')) problems.push('no approval wait after reserve ∥ fraud');
  if (!base.steps.some((s) => s.name === 'charge' && s.dependsOn?.includes('approval'))) problems.push('charge no longer follows the approval');
  for (const name of ['reserve', 'charge', 'ship']) {
    const step = doc.steps.find((s) => s.name === name);
    if (!step?.compensate) problems.push(`step ${name} ${step ? 'has no compensation' : 'is missing'}`);
  }
  if (problems.length > 0) {
    throw new Error(`the example's ordersWorkflow no longer fits the chaos run (${problems.join('; ')}); restore it or adapt test/chaos/workflow.ts`);
  }
  return doc;
}

/** The validated chaos workflow and its bound for the given supervision. */
export function chaosBound(supervision: Supervision = CHAOS_SUPERVISION): { definition: WorkflowDefinition; bound: TaskBound } {
  const definition = validateDefinition(chaosOrdersWorkflow());
  return { definition, bound: taskBound(definition, supervision) };
}
