/** `triad alerts`: open operator alerts — steps that failed for good and were not retried since. */
import type { Command } from 'commander';
import { isoTime, table, truncate } from '../format.js';
import { out, printJson } from '../io.js';
import { action, connectionOptions, examples, optionsOf } from '../options.js';

export function register(program: Command): void {
  const cmd = program.command('alerts').description('list open operator alerts (closed by a successful triad retry)').option('--json', 'print the alerts as a JSON array');
  connectionOptions(cmd);
  examples(cmd, ['triad alerts', 'triad alerts --json']);
  cmd.action(
    action(async (_opts: unknown, self: Command) => {
      const { withClient } = await import('../runtime.js');
      const o = optionsOf<{ json?: boolean }>(self);
      return withClient(self, async (client) => {
        const alerts = await client.alerts();
        if (o.json) {
          printJson(alerts);
          return 0;
        }
        if (alerts.length === 0) {
          out('no open alerts');
          return 0;
        }
        out(table(['RAISED', 'TASK', 'STEP', 'FAILURES', 'LAST ERROR'], alerts.map((a) => [isoTime(a.raisedAt), a.taskId, a.step, a.failureCount, truncate(a.lastError ?? '', 80)])));
        out(`\nretry one with: triad retry <taskId> [--step <name>] [--input <json>]`);
        return 0;
      });
    }),
  );
}
