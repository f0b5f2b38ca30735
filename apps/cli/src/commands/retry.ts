/** `triad retry`: resubmit a failed (or parked) step, optionally with a corrected task input. */
import type { Command } from 'commander';
import { bulkOptions, isBulk, runBulk, type BulkOptions } from '../bulk.js';
import { out, printJson, taskInput, usageError } from '../io.js';
import { action, connectionOptions, examples, optionsOf } from '../options.js';

export function register(program: Command): void {
  const cmd = program
    .command('retry [taskId]')
    .description('resubmit a task\'s failed step (or --step) with a fresh failure budget; the task runs on from there; with --where, every failed task that matches (operator)')
    .option('--step <name>', 'the step to retry (default: the failed one)')
    .option('--input <json>', 'replace the task input with this corrected JSON')
    .option('--input-file <path>', 'replace the task input with this JSON file ("-" for stdin)')
    .option('--json', 'print { taskId, step, attempt } as JSON (with --where: the operation\'s final record)');
  bulkOptions(cmd, 'retry');
  connectionOptions(cmd);
  examples(cmd, [`triad retry 3f2a… --step charge`, `triad retry 3f2a… --input '{"orderId":"o1","amount":40}'`, 'triad retry --where customer=c-42 --status failed --step charge --yes']);
  cmd.action(
    action(async (taskId: string | undefined, _opts: unknown, self: Command) => {
      const { withClient } = await import('../runtime.js');
      const o = optionsOf<BulkOptions & { step?: string; input?: string; inputFile?: string; json?: boolean }>(self);
      if (taskId !== undefined && isBulk(o)) throw usageError('give a task id or --where, not both: a task id retries that task, --where every task that matches');
      if (taskId === undefined && !isBulk(o)) throw usageError('name the task to retry, or the tasks with --where (e.g. --where customer=c-42)');
      if (taskId === undefined && (o.input !== undefined || o.inputFile !== undefined)) throw usageError('--input replaces one task\'s input: it cannot be given with --where');
      if (taskId === undefined) return withClient(self, (client) => runBulk(client, 'retry', o));
      // Validated before connecting; only a given input replaces the task's.
      const replace = o.input !== undefined || o.inputFile !== undefined;
      const input = replace ? taskInput(o) : undefined;
      return withClient(self, async (client) => {
        const r = await client.retry(taskId, { ...(o.step ? { step: o.step } : {}), ...(replace ? { input } : {}) });
        if (o.json) printJson(r);
        else out(`retrying ${r.step} of ${r.taskId} (attempt ${r.attempt})${replace ? ' with the new input' : ''}; follow it with: triad watch ${r.taskId}`);
        return 0;
      });
    }),
  );
}
