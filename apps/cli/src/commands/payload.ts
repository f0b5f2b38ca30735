/**
 * `triad payload <taskId>`: a task's input or one step's output, as JSON — downloaded through a scheduler
 * when it is stored as an object (a large payload, decision 0021 §4), printed as is when inline.
 */
import { writeFileSync } from 'node:fs';
import type { Command } from 'commander';
import { out } from '../io.js';
import { action, connectionOptions, examples, optionsOf } from '../options.js';

export function register(program: Command): void {
  const cmd = program
    .command('payload')
    .description("print a task's input or a step's output as JSON, downloading it when it is stored as an object (above TRIAD_INLINE_MAX_BYTES)")
    .argument('<taskId>', 'the task id')
    .option('--step <step>', "the step whose output to print (default: the task's input)")
    .option('--input', "the task's input (the default)")
    .option('--out <file>', 'write the JSON to this file instead of stdout');
  connectionOptions(cmd);
  examples(cmd, ['triad payload order-o1', 'triad payload order-o1 --step ship --out label.json']);
  cmd.action(
    action(async (taskId: string, _opts: unknown, self: Command) => {
      const { withClient } = await import('../runtime.js');
      const o = optionsOf<{ step?: string; input?: boolean; out?: string }>(self);
      if (o.step !== undefined && o.input) {
        process.stderr.write('triad: give either --step <step> or --input, not both\n');
        return 2;
      }
      return withClient(self, async (client) => {
        const task = await client.getTask(taskId);
        let value: unknown = task.input;
        if (o.step !== undefined) {
          const step = task.steps.find((s) => s.name === o.step);
          if (!step) {
            process.stderr.write(`triad: task ${taskId} has no step "${o.step}"; its steps: ${task.steps.map((s) => s.name).join(', ')}\n`);
            return 2;
          }
          value = step.output;
        }
        const resolved = await client.resolvePayloads(value);
        const text = `${JSON.stringify(resolved ?? null, null, 2)}\n`;
        if (o.out !== undefined) writeFileSync(o.out, text);
        else out(text.trimEnd());
        return 0;
      });
    }),
  );
}
