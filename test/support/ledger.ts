// Checks the example services' ledgers against the tasks' final states (decision 0009): an undone task
// leaves no effect behind, a completed one has nothing undone, nothing is applied or undone twice.
import type { RemoteService } from '@triad/example-orders';
import type { TaskState, WorkflowDefinitionInput } from '@triad/protocol';

export interface LedgerReport {
  /** Applied effects of an undone (cancelled or compensated) task's undoable steps that were not undone. */
  orphans: string[];
  /** Effects undone for a task that completed. */
  wrongUndos: string[];
  /** Effects reverted more than once, or applied under a key no task step owns. */
  duplicates: string[];
}

/**
 * Reads every service's ledger for `tasks` of `workflow` (a step's effects live on the service named
 * like its agent, under `<namespace>/<taskId>/<step>`). Only steps that declare a compensation can be
 * undone; a step without one declares it has nothing to undo.
 */
export function checkLedgers(namespace: string, services: Readonly<Record<string, RemoteService>>, workflow: WorkflowDefinitionInput, tasks: readonly TaskState[]): LedgerReport {
  const report: LedgerReport = { orphans: [], wrongUndos: [], duplicates: [] };
  const byId = new Map(tasks.map((t) => [t.taskId, t]));
  const prefix = `${namespace}/`;
  for (const service of Object.values(services)) {
    for (const e of service.effects()) {
      if (!e.idempotencyKey.startsWith(prefix)) continue;
      const [taskId, stepName, ...rest] = e.idempotencyKey.slice(prefix.length).split('/');
      const task = taskId !== undefined ? byId.get(taskId) : undefined;
      const step = workflow.steps.find((s) => s.name === stepName);
      const where = `${service.name} ${e.idempotencyKey}`;
      if (e.reversals > 1) report.duplicates.push(`${where} reverted ${e.reversals} times`);
      if (!task) continue;
      // A fan-out step's effects are its elements': <step>/<index> (decision 0019 §4).
      const element = step?.forEach !== undefined && rest.length === 1 && /^\d+$/.test(rest[0] ?? '');
      if (!step || (rest.length > 0 && !element) || step.agent !== service.name) {
        report.duplicates.push(`${where}: no step of the workflow applies effects under this key on this service`);
        continue;
      }
      if (!e.applied) continue;
      if ((task.status === 'cancelled' || task.status === 'compensated') && step.compensate && !e.undone) report.orphans.push(`${where} (task ${task.status})`);
      if (task.status === 'completed' && e.undone) report.wrongUndos.push(`${where} (task completed)`);
    }
  }
  return report;
}
