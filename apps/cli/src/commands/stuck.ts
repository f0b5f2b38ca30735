/**
 * `triad stuck` (decision 0021 §3.7): the unfinished tasks past their workflow's bound, or with a deadline
 * no supervisor acted on, latest first — each with what it waits for now — and, first, the submissions no
 * scheduler has picked up yet.
 */
import { InvalidArgumentError, type Command } from 'commander';
import { NAME_PATTERN } from '@triad/protocol/constants';
import { collectTag, checkedTags } from '../filters.js';
import { duration, isoTime, table, truncate } from '../format.js';
import { intArg, out, printJson } from '../io.js';
import { action, connectionOptions, examples, optionsOf } from '../options.js';

function workflowName(value: string): string {
  if (!NAME_PATTERN.test(value)) throw new InvalidArgumentError(`"${value}" is not a workflow name: a name starts with a letter and has at most 64 letters, digits, "_" or "-".`);
  return value;
}

export function register(program: Command): void {
  const cmd = program
    .command('stuck')
    .description("list the tasks that made no progress for longer than their workflow's bounds allow: past their bound, or a deadline no supervisor acted on")
    .option('--limit <n>', 'at most this many tasks (1-200)', intArg(1, 200), 50)
    .option('--workflow <name>', 'only tasks of this workflow', workflowName)
    .option('--tag <key=value>', 'only tasks with this tag (repeatable: every one must match)', collectTag('--tag'))
    .option('--scan <n>', 'index entries read per bucket at most (1-10000)', intArg(1, 10_000), 2_000)
    .option('--json', 'print { submissions, tasks, scanned, complete } as JSON, each task with its waiting reason');
  connectionOptions(cmd);
  examples(cmd, ['triad stuck', 'triad stuck --workflow orders --tag customer=c-42 --json']);
  cmd.action(
    action(async (_opts: unknown, self: Command) => {
      const [{ withClient }, { gatherWaitContext }, { taskWaiting }] = await Promise.all([import('../runtime.js'), import('../explain.js'), import('../waiting.js')]);
      const o = optionsOf<{ limit: number; workflow?: string; tag?: Record<string, string>; scan: number; json?: boolean }>(self);
      const tags = checkedTags(o.tag, '--tag');
      return withClient(self, async (client) => {
        const [r, backlog] = await Promise.all([
          client.stuckTasks({ limit: o.limit, scan: o.scan, ...(o.workflow ? { workflow: o.workflow } : {}), ...(tags ? { tags } : {}) }),
          client.submissionBacklog().catch(() => undefined),
        ]);
        const now = Date.now();
        // What each waits for now (its state and what the agents and supervisors say), read together.
        const waiting = await Promise.all(
          r.tasks.map(async (s) => {
            const t = await client.getTask(s.summary.taskId).catch(() => undefined);
            if (!t) return undefined;
            return taskWaiting(t, now, await gatherWaitContext(client, t, now));
          }),
        );
        if (o.json) {
          printJson({
            ...(backlog ? { submissions: { waiting: backlog.waiting, pulling: backlog.pulling, ...(backlog.oldestAt !== undefined ? { oldestAt: backlog.oldestAt } : {}) } } : {}),
            tasks: r.tasks.map((s, i) => ({ ...s, ...(waiting[i] ? { waiting: { step: waiting[i]?.step, ...waiting[i]?.reason } } : {}) })),
            scanned: r.scanned,
            complete: r.complete,
          });
          return 0;
        }
        if (backlog && backlog.waiting > 0) {
          const oldest = backlog.oldestAt !== undefined ? `, the oldest for ${duration(now - backlog.oldestAt)}` : '';
          out(`${backlog.waiting.toLocaleString('en-US')} submission${backlog.waiting === 1 ? '' : 's'} not yet picked up by any scheduler${oldest}${backlog.pulling === 0 ? '; no scheduler pulling' : ''}`);
        }
        if (r.tasks.length === 0) out('no stuck task');
        else {
          out(
            table(
              ['TASK', 'WORKFLOW', 'STATUS', 'CREATED', 'LATE', 'LAST PROGRESS', 'WAITING'],
              r.tasks.map((s, i) => {
                const w = waiting[i];
                const why = s.why === 'overdue' ? 'a deadline passed' : s.why === 'both' ? 'past its bound, a deadline passed' : 'past its bound';
                return [
                  s.summary.taskId,
                  `${s.summary.workflow}@${s.summary.version}`,
                  s.summary.status,
                  isoTime(s.summary.createdAt),
                  `${duration(s.lateMs)} (${why})`,
                  `${duration(now - s.lastProgressAt)} ago`,
                  w ? truncate(`${w.step}: ${w.text}`, 100) : undefined,
                ];
              }),
            ),
          );
        }
        if (!r.complete) out(`(read ${r.scanned.toLocaleString('en-US')} index entries and stopped: more tasks may be stuck; raise --scan or narrow with --workflow)`);
        return 0;
      });
    }),
  );
}
