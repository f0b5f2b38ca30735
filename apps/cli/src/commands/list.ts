/** `triad list`: recent tasks, optionally of one status. */
import type { Command } from 'commander';
import type { TaskStatus } from '@triad/protocol';
import { isoTime, table } from '../format.js';
import { TASK_STATUSES, intArg, out, parseStatus, printJson } from '../io.js';
import { action, connectionOptions, examples, optionsOf } from '../options.js';

export function register(program: Command): void {
  const cmd = program
    .command('list')
    .description('list tasks, newest first')
    .option('--status <status>', `only tasks with this status (${TASK_STATUSES.join(', ')})`, parseStatus)
    .option('--limit <n>', 'at most this many tasks', intArg(1, 10_000), 50)
    .option('--json', 'print the tasks as a JSON array');
  connectionOptions(cmd);
  examples(cmd, ['triad list --status failed --limit 20']);
  cmd.action(
    action(async (_opts: unknown, self: Command) => {
      const { withClient } = await import('../runtime.js');
      const o = optionsOf<{ status?: TaskStatus; limit: number; json?: boolean }>(self);
      return withClient(self, async (client) => {
        const tasks = await client.listTasks({ ...(o.status ? { status: o.status } : {}), limit: o.limit });
        if (o.json) {
          printJson(tasks);
          return 0;
        }
        if (tasks.length === 0) {
          out(o.status ? `no ${o.status} tasks` : 'no tasks');
          return 0;
        }
        out(table(['TASK', 'WORKFLOW', 'STATUS', 'CREATED', 'UPDATED'], tasks.map((t) => [t.taskId, `${t.workflow}@${t.version}`, t.status, isoTime(t.createdAt), isoTime(t.updatedAt)])));
        return 0;
      });
    }),
  );
}
