/** `triad list`: tasks newest first, by tags, status, workflow, client and creation time (decision 0021). */
import type { Command } from 'commander';
import { isoTime, table } from '../format.js';
import { filterOptions, filterText, queryFilter, tagsText, type FilterOptions } from '../filters.js';
import { intArg, out, printJson } from '../io.js';
import { action, connectionOptions, examples, optionsOf } from '../options.js';

/** The API's page size limit: a larger --limit follows the cursor. */
const PAGE = 1_000;

export function register(program: Command): void {
  const cmd = program.command('list').description('list tasks, newest first');
  filterOptions(cmd, { tagFlag: '--tag' })
    .option('--limit <n>', 'at most this many tasks', intArg(1, 10_000), 50)
    .option('--cursor <cursor>', 'go on where a previous list stopped (the cursor it printed)')
    .option('--json', 'print { tasks, next? } as JSON');
  connectionOptions(cmd);
  examples(cmd, ['triad list --status failed --limit 20', 'triad list --tag customer=c-42 --status failed --workflow orders --since 1h']);
  cmd.action(
    action(async (_opts: unknown, self: Command) => {
      const { withClient } = await import('../runtime.js');
      const o = optionsOf<FilterOptions & { limit: number; cursor?: string; json?: boolean }>(self);
      const filter = queryFilter(o);
      return withClient(self, async (client) => {
        const tasks = [];
        let cursor = o.cursor;
        let next: string | undefined;
        do {
          const page = await client.queryTasks({ ...filter, limit: Math.min(PAGE, o.limit - tasks.length), ...(cursor ? { cursor } : {}) });
          tasks.push(...page.tasks);
          next = page.next;
          cursor = next;
        } while (next && tasks.length < o.limit);
        if (o.json) {
          printJson({ tasks, ...(next ? { next } : {}) });
          return 0;
        }
        if (tasks.length === 0 && !next) {
          out(`no tasks (${filterText(filter)})`);
          return 0;
        }
        if (tasks.length > 0) {
          out(table(['TASK', 'WORKFLOW', 'STATUS', 'CREATED', 'UPDATED', 'TAGS'], tasks.map((t) => [t.taskId, `${t.workflow}@${t.version}`, t.status, isoTime(t.createdAt), isoTime(t.updatedAt), tagsText(t.tags)])));
        }
        if (next) {
          const shown = tasks.length < o.limit ? ' (this page stopped at its read budget; there may be more)' : '';
          out(`more${shown}: triad list ${process.argv.slice(3).filter((a, i, all) => a !== '--cursor' && all[i - 1] !== '--cursor').join(' ')} --cursor ${next}`);
        }
        return 0;
      });
    }),
  );
}
