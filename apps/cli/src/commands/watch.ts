/** `triad watch <taskId>`: a task's events, history then live, until it ends. */
import type { Command } from 'commander';
import type { TaskState } from '@triad/protocol';
import { isTerminal } from '@triad/protocol/constants';
import { intArg } from '../io.js';
import { action, connectionOptions, examples, optionsOf } from '../options.js';

/** How long to wait for events of a task that already ended (its history may have aged out). */
const ENDED_IDLE_MS = 2_000;
/** How long to wait for a first event of a task the schedulers do not know (yet). */
const UNKNOWN_IDLE_MS = 3_000;

export function register(program: Command): void {
  const cmd = program
    .command('watch')
    .description("print a task's events (its history, then live ones) until it ends; exit 0 only if it completed")
    .argument('<taskId>', 'the task id')
    .option('--timeout <ms>', 'give up after this long (default: as long as the task runs)', intArg(1))
    .option('--json', 'one JSON line per event, then one JSON line with the final state');
  connectionOptions(cmd);
  examples(cmd, ['triad watch order-o1', 'triad watch order-o1 --json | jq -c .type']);
  cmd.action(
    action(async (taskId: string, _opts: unknown, self: Command) => {
      const [{ withClient }, { isUnknownTask, showFollow }] = await Promise.all([import('../runtime.js'), import('../follow.js')]);
      const o = optionsOf<{ timeout?: number; json?: boolean }>(self);
      return withClient(self, async (client) => {
        // Read the state first: an unknown id then fails fast instead of waiting forever, and a task
        // that already ended is not waited for if its events have aged out.
        let known: TaskState | undefined;
        try {
          known = await client.getTask(taskId);
        } catch (e) {
          // Perhaps just submitted and not received yet, or rejected: look for its events briefly.
          if (!isUnknownTask(e)) throw e;
        }
        const ended = known !== undefined && isTerminal(known.status);
        return showFollow(client, taskId, {
          output: o.json ? 'lines' : 'human',
          ...(o.timeout !== undefined ? { timeoutMs: o.timeout } : {}),
          ...(known === undefined ? { idleMs: UNKNOWN_IDLE_MS, idleUntilFirstEvent: true } : ended ? { idleMs: ENDED_IDLE_MS } : {}),
          ...(known !== undefined ? { known } : {}),
        });
      });
    }),
  );
}
