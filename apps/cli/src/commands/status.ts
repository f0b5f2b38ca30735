/** `triad status <taskId>`: a task's state and its steps. */
import type { Command } from 'commander';
import { duration, stepsTable, taskHeader, truncate } from '../format.js';
import { out, printJson } from '../io.js';
import { stepWaiting, taskWaiting, waitReason } from '../waiting.js';
import type { TriadClient } from '@triad/client';

/** "not yet picked up by any scheduler: …" when submissions wait in the SUBMIT stream; undefined when none wait (or it cannot be read). */
async function notPickedUp(client: TriadClient, taskId: string): Promise<string | undefined> {
  const b = await client.submissionBacklog().catch(() => undefined);
  if (!b || b.waiting === 0) return undefined;
  const oldest = b.oldestAt !== undefined ? `, the oldest for ${duration(Date.now() - b.oldestAt)} (since ${new Date(b.oldestAt).toISOString()})` : '';
  const pulling = b.pulling === 0 ? 'no scheduler pulling' : `${b.pulling} scheduler request${b.pulling === 1 ? '' : 's'} pulling`;
  return `no task ${taskId} yet: not yet picked up by any scheduler — ${b.waiting} submission${b.waiting === 1 ? '' : 's'} wait${b.waiting === 1 ? 's' : ''}${oldest}; ${pulling}${b.inProgress > 0 ? `, ${b.inProgress} being recorded` : ''}`;
}
import { action, connectionOptions, examples, optionsOf } from '../options.js';

export function register(program: Command): void {
  const cmd = program
    .command('status')
    .description("show a task's state: status, lock, times, error, and a table of its steps")
    .argument('<taskId>', 'the task id (as printed by triad submit)')
    .option('--json', 'print the task state as JSON (with each unfinished step\'s waiting reason as `waiting`)')
    .option('--no-explain', 'do not ask the agents which instance holds an attempt, nor the supervisors why a deadline passed (decision 0021 §3.3)');
  connectionOptions(cmd);
  examples(cmd, ['triad status order-o1', 'triad status order-o1 --json']);
  cmd.action(
    action(async (taskId: string, _opts: unknown, self: Command) => {
      const { withClient } = await import('../runtime.js');
      const o = optionsOf<{ json?: boolean; explain?: boolean }>(self);
      return withClient(self, async (client) => {
        let task;
        try {
          task = await client.getTask(taskId);
        } catch (e) {
          // No task (yet), or no scheduler answering: is it a submission no scheduler has picked up (decision 0021 §3.4)?
          // (Codes compared as strings: importing @triad/protocol's values here would load it for every command's --help.)
          const code = (e as { code?: unknown } | undefined)?.code;
          const why = code === 'UNKNOWN_TASK' || code === 'UNAVAILABLE' ? await notPickedUp(client, taskId) : undefined;
          if (!why) throw e;
          out(why);
          return 1;
        }
        const now = Date.now();
        const ctx = o.explain === false ? {} : await (await import('../explain.js')).gatherWaitContext(client, task, now);
        if (o.json) {
          printJson({
            ...task,
            steps: task.steps.map((s) => {
              const waiting = waitReason(task, s, now, ctx);
              return waiting ? { ...s, waiting } : s;
            }),
          });
          return 0;
        }
        const first = taskWaiting(task, now, ctx);
        out(taskHeader(task, now, first ? `${first.step}: ${truncate(first.text, 100)}` : undefined));
        out('');
        out(task.steps.length > 0 ? stepsTable(task.steps, now, (s) => stepWaiting(task, s, now, ctx)) : '(no steps)');
        return 0;
      });
    }),
  );
}
