/** `triad cancel`: stop a running task and undo (compensate) the steps it completed. */
import type { Command } from 'commander';
import { out, printJson } from '../io.js';
import { action, connectionOptions, examples, optionsOf } from '../options.js';

export function register(program: Command): void {
  const cmd = program
    .command('cancel <taskId>')
    .description('stop a running task: no new step starts, completed steps are compensated in reverse order, the task ends cancelled')
    .option('--reason <text>', 'why (recorded on the task and in its events)')
    .option('--json', 'print { taskId, status } as JSON');
  connectionOptions(cmd);
  examples(cmd, ['triad cancel 3f2a… --reason "customer withdrew the order"', 'triad cancel 3f2a… && triad watch 3f2a…']);
  cmd.action(
    action(async (taskId: string, _opts: unknown, self: Command) => {
      const { withClient } = await import('../runtime.js');
      const o = optionsOf<{ reason?: string; json?: boolean }>(self);
      return withClient(self, async (client) => {
        const r = await client.cancel(taskId, o.reason);
        if (o.json) printJson(r);
        else out(`${r.taskId} is ${r.status}; follow the undo with: triad watch ${r.taskId}`);
        return 0;
      });
    }),
  );
}
