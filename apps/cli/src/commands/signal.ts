/** `triad signal`: send a signal to a task's waitFor step (decision 0019 §3). */
import type { Command } from 'commander';
import { out, parseJson, printJson } from '../io.js';
import { action, connectionOptions, examples, optionsOf } from '../options.js';

const DATA_EXAMPLE = `--data '{"approvedBy":"ana"}'`;

export function register(program: Command): void {
  const cmd = program
    .command('signal <taskId> <name>')
    .description("send the signal <name> to a task: the step waiting for it ends with --data as its output (kept until that step waits, if it has not started yet); an operator may signal any task, a client its own")
    .option('--data <json>', 'the signal data as JSON: the waiting step\'s output')
    .option('--id <signalId>', 'the signal id (default: a new one); sending the same id again is harmless')
    .option('--json', 'print { taskId, name, signalId, outcome, step } as JSON');
  connectionOptions(cmd);
  examples(cmd, [`triad signal 3f2a… approved ${DATA_EXAMPLE}`, 'triad signal 3f2a… approved --id approval-3f2a --json']);
  cmd.action(
    action(async (taskId: string, name: string, _opts: unknown, self: Command) => {
      const o = optionsOf<{ data?: string; id?: string; json?: boolean }>(self);
      // Validated before connecting: bad data never needs a server to be reported.
      const data = o.data === undefined ? undefined : parseJson(o.data, '--data', DATA_EXAMPLE);
      const { withClient } = await import('../runtime.js');
      return withClient(self, async (client) => {
        const r = await client.signal(taskId, name, data, o.id !== undefined ? { id: o.id } : {});
        if (o.json) printJson(r);
        else if (r.outcome === 'delivered') out(`signal ${r.name} (id ${r.signalId}) delivered to step ${r.step ?? '?'} of ${r.taskId}; follow it with: triad watch ${r.taskId}`);
        else if (r.outcome === 'buffered') out(`signal ${r.name} (id ${r.signalId}) kept by ${r.taskId}: the step waiting for it has not started yet and will take it when it does`);
        else out(`signal id ${r.signalId} was already accepted by ${r.taskId}${r.step ? ` (delivered to step ${r.step})` : ' (kept until its step waits)'}; nothing changed`);
        return 0;
      });
    }),
  );
}
