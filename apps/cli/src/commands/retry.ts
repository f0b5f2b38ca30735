/** `triad retry`: resubmit a failed (or parked) step, optionally with a corrected task input. */
import type { Command } from 'commander';
import { out, printJson, taskInput } from '../io.js';
import { action, connectionOptions, examples, optionsOf } from '../options.js';

export function register(program: Command): void {
  const cmd = program
    .command('retry <taskId>')
    .description('resubmit a task\'s failed step (or --step) with a fresh failure budget; the task runs on from there')
    .option('--step <name>', 'the step to retry (default: the failed one)')
    .option('--input <json>', 'replace the task input with this corrected JSON')
    .option('--input-file <path>', 'replace the task input with this JSON file ("-" for stdin)')
    .option('--json', 'print { taskId, step, attempt } as JSON');
  connectionOptions(cmd);
  examples(cmd, [`triad retry 3f2a… --step charge`, `triad retry 3f2a… --input '{"orderId":"o1","amount":40}'`]);
  cmd.action(
    action(async (taskId: string, _opts: unknown, self: Command) => {
      const { withClient } = await import('../runtime.js');
      const o = optionsOf<{ step?: string; input?: string; inputFile?: string; json?: boolean }>(self);
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
