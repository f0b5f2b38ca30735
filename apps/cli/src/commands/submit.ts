/** `triad submit <workflow>`: submits a task, optionally waiting for its outcome. */
import { InvalidArgumentError, type Command } from 'commander';
import { NAME_PATTERN, TASK_ID_PATTERN } from '@triad/protocol/constants';
import { intArg, out, taskInput, usageError } from '../io.js';
import { action, connectionOptions, examples, optionsOf } from '../options.js';
import { checkedTags, collectTag } from '../filters.js';

interface SubmitOptions {
  input?: string;
  inputFile?: string;
  id?: string;
  version?: number;
  priority?: number;
  wait?: boolean;
  timeout: number;
  json?: boolean;
  tag?: Record<string, string>;
}

export function register(program: Command): void {
  const cmd = program
    .command('submit')
    .description('submit a task: prints its id, or with --wait follows it until it ends')
    .argument('<workflow>', 'the workflow to run (its latest version unless --version)')
    .option('--input <json>', 'the task input as JSON (default {})')
    .option('--input-file <path>', 'read the task input from a JSON file ("-" for stdin)')
    .option('--id <taskId>', 'the task id (default: a random UUID); the same id submitted twice runs once')
    .option('--version <n>', 'pin a workflow version', intArg(1))
    .option('--priority <n>', '1 (highest) … 5 (lowest), default 3: orders its steps waiting for a dispatch limit (decision 0020)', priorityArg)
    .option('--tag <key=value>', 'a search attribute (repeatable): triad list --tag key=value finds the task', collectTag('--tag'))
    .option('--wait', 'follow the task and exit 0 only if it completes')
    .option('--timeout <ms>', 'with --wait: give up waiting after this long', intArg(1), 60_000)
    .option('--json', 'print one JSON object on stdout: { taskId, status, steps, ... }');
  connectionOptions(cmd);
  examples(cmd, [
    `triad submit orders --input '{"orderId":"o1","amount":42}'`,
    `triad submit orders --input-file order.json --id order-o1 --wait --timeout 30000`,
    `triad submit orders --priority 1 --input '{"orderId":"o2","amount":42}'`,
    `triad submit orders --input '{"orderId":"o1"}' --tag customer=c-42 --tag region=eu`,
  ]);
  cmd.action(
    action(async (workflow: string, _opts: unknown, self: Command) => {
      const [{ withClient, explainBusError }, { showFollow }] = await Promise.all([import('../runtime.js'), import('../follow.js')]);
      const o = optionsOf<SubmitOptions>(self);
      if (!NAME_PATTERN.test(workflow)) {
        throw usageError(`"${workflow}" is not a workflow name: a name starts with a letter and has at most 64 letters, digits, "_" or "-"`);
      }
      if (o.id !== undefined && !TASK_ID_PATTERN.test(o.id)) {
        throw usageError(`--id "${o.id}" is not a task id: a task id is 1-128 letters, digits, "_", "-" or ":"`);
      }
      // Validated before connecting: a bad input never needs a server to be reported.
      const input = taskInput(o);
      const tags = checkedTags(o.tag, '--tag', { submitting: true });
      return withClient(self, async (client, conn) => {
        let submitted: { taskId: string; duplicate: boolean };
        try {
          submitted = await client.submit(workflow, input, {
            ...(o.id !== undefined ? { taskId: o.id } : {}),
            ...(o.version !== undefined ? { version: o.version } : {}),
            ...(o.priority !== undefined ? { priority: o.priority } : {}),
            ...(tags ? { tags } : {}),
          });
        } catch (e) {
          throw explainBusError(e, `submit a task of workflow ${workflow}`, conn.namespace);
        }
        const { taskId, duplicate } = submitted;
        if (!o.wait) {
          if (o.json) out(JSON.stringify({ taskId, status: 'submitted', duplicate, steps: [] }, null, 2));
          else out(taskId);
          if (duplicate && !o.json) process.stderr.write(`triad: task ${taskId} was already submitted; it runs once\n`);
          return 0;
        }
        if (!o.json) process.stderr.write(`submitted ${taskId}${duplicate ? ' (already submitted before: following the first submission)' : ''}\n`);
        return showFollow(client, taskId, { output: o.json ? 'object' : 'human', timeoutMs: o.timeout });
      });
    }),
  );
}

/** `--priority`: checked before anything is sent, with the protocol's words (decision 0020 §1.4). */
export function priorityArg(value: string): number {
  const n = /^\s*\d+\s*$/.test(value) ? Number(value) : Number.NaN;
  if (!Number.isInteger(n) || n < 1 || n > 5) throw new InvalidArgumentError(`--priority: expected a whole number from 1 (highest) to 5 (lowest), got "${value}".`);
  return n;
}
