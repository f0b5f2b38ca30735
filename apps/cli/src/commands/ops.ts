/** `triad ops`: recent bulk operations (triad cancel|retry --where), or one, with their progress (operator). */
import type { Command } from 'commander';
import { isoTime, keyValues, table } from '../format.js';
import { filterText } from '../filters.js';
import { intArg, out, printJson } from '../io.js';
import { action, connectionOptions, examples, optionsOf } from '../options.js';

export function register(program: Command): void {
  const cmd = program
    .command('ops [opId]')
    .description('list recent bulk operations, or show one (operator)')
    .option('--limit <n>', 'at most this many operations', intArg(1, 200), 20)
    .option('--json', 'print the record(s) as JSON');
  connectionOptions(cmd);
  examples(cmd, ['triad ops', 'triad ops op-2k4x9q']);
  cmd.action(
    action(async (opId: string | undefined, _opts: unknown, self: Command) => {
      const { withClient } = await import('../runtime.js');
      const o = optionsOf<{ limit: number; json?: boolean }>(self);
      return withClient(self, async (client) => {
        if (opId !== undefined) {
          const op = await client.bulkOperation(opId);
          if (o.json) printJson(op);
          else
            out(
              keyValues([
                ['operation', op.id],
                ['action', `${op.action}${op.step ? ` (step ${op.step})` : ''}`],
                ['tasks', `${filterText(op.filter)}, created before ${isoTime(op.asOf)}`],
                ['state', op.state],
                ['progress', `${op.acted} acted · ${op.already} already · ${op.skipped} skipped · ${op.missing} missing · ${op.failed} failed, of ~${op.matched}`],
                ['started', isoTime(op.createdAt)],
                ['updated', isoTime(op.updatedAt)],
              ]),
            );
          return 0;
        }
        const ops = await client.bulkOperations(o.limit);
        if (o.json) printJson(ops);
        else if (ops.length === 0) out('no bulk operations');
        else out(table(['OPERATION', 'ACTION', 'STATE', 'ACTED', 'OF', 'STARTED', 'TASKS'], ops.map((x) => [x.id, x.action, x.state, x.acted, x.matched, isoTime(x.createdAt), filterText(x.filter)])));
        return 0;
      });
    }),
  );
}
