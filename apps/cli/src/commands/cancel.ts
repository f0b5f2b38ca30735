/** `triad cancel`: stop a running task — or, with --where, every running task that matches — and undo it. */
import type { Command } from 'commander';
import { bulkOptions, isBulk, runBulk, type BulkOptions } from '../bulk.js';
import { out, printJson, usageError } from '../io.js';
import { action, connectionOptions, examples, optionsOf } from '../options.js';

export function register(program: Command): void {
  const cmd = program
    .command('cancel [taskId]')
    .description('stop a running task: no new step starts, completed steps are compensated in reverse order, the task ends cancelled; with --where, every running task that matches (operator)')
    .option('--reason <text>', 'why (recorded on the task and in its events)')
    .option('--json', 'print { taskId, status } as JSON (with --where: the operation\'s final record)');
  bulkOptions(cmd, 'cancel');
  connectionOptions(cmd);
  examples(cmd, [
    'triad cancel 3f2a… --reason "customer withdrew the order"',
    'triad cancel 3f2a… && triad watch 3f2a…',
    'triad cancel --where customer=c-42 --dry-run',
    'triad cancel --where customer=c-42 --status running --yes --rate 20',
  ]);
  cmd.action(
    action(async (taskId: string | undefined, _opts: unknown, self: Command) => {
      const { withClient } = await import('../runtime.js');
      const o = optionsOf<BulkOptions & { reason?: string; json?: boolean }>(self);
      if (taskId !== undefined && isBulk(o)) throw usageError('give a task id or --where, not both: a task id cancels that task, --where every task that matches');
      if (taskId === undefined && !isBulk(o)) throw usageError('name the task to cancel, or the tasks with --where (e.g. --where customer=c-42)');
      return withClient(self, async (client) => {
        if (taskId === undefined) return runBulk(client, 'cancel', o);
        const r = await client.cancel(taskId, o.reason);
        if (o.json) printJson(r);
        else out(`${r.taskId} is ${r.status}; follow the undo with: triad watch ${r.taskId}`);
        return 0;
      });
    }),
  );
}
