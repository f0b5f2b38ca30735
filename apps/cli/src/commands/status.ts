/** `triad status <taskId>`: a task's state and its steps. */
import type { Command } from 'commander';
import { stepsTable, taskHeader } from '../format.js';
import { out, printJson } from '../io.js';
import { stepWaiting } from '../waiting.js';
import { action, connectionOptions, examples, optionsOf } from '../options.js';

export function register(program: Command): void {
  const cmd = program
    .command('status')
    .description("show a task's state: status, lock, times, error, and a table of its steps")
    .argument('<taskId>', 'the task id (as printed by triad submit)')
    .option('--json', 'print the task state as JSON');
  connectionOptions(cmd);
  examples(cmd, ['triad status order-o1', 'triad status order-o1 --json']);
  cmd.action(
    action(async (taskId: string, _opts: unknown, self: Command) => {
      const { withClient } = await import('../runtime.js');
      const o = optionsOf<{ json?: boolean }>(self);
      return withClient(self, async (client) => {
        const task = await client.getTask(taskId);
        if (o.json) {
          printJson(task);
          return 0;
        }
        const now = Date.now();
        out(taskHeader(task, now));
        out('');
        out(task.steps.length > 0 ? stepsTable(task.steps, now, (s) => stepWaiting(task, s, now)) : '(no steps)');
        return 0;
      });
    }),
  );
}
