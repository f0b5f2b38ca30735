/** `triad count`: how many tasks match the filters of `triad list` (decision 0021). */
import type { Command } from 'commander';
import { filterOptions, queryFilter, type FilterOptions } from '../filters.js';
import { out, printJson } from '../io.js';
import { action, connectionOptions, examples, optionsOf } from '../options.js';

export function register(program: Command): void {
  const cmd = program.command('count').description('count the tasks that match the filters');
  filterOptions(cmd, { tagFlag: '--tag' }).option('--json', 'print { count, exact } as JSON');
  connectionOptions(cmd);
  examples(cmd, ['triad count --tag customer=c-42', 'triad count --tag customer=c-42 --status failed --since 1d']);
  cmd.action(
    action(async (_opts: unknown, self: Command) => {
      const { withClient } = await import('../runtime.js');
      const o = optionsOf<FilterOptions & { json?: boolean }>(self);
      const filter = queryFilter(o);
      return withClient(self, async (client) => {
        const r = await client.countTasks(filter);
        if (o.json) printJson({ count: r.count, exact: r.exact });
        else if (r.exact) out(String(r.count));
        else out(`at least ${r.count.toLocaleString('en-US')} (stopped after reading ${r.scanned.toLocaleString('en-US')} index entries: narrow the filter)`);
        return 0;
      });
    }),
  );
}
