/**
 * `triad schedules`: tasks submitted on a schedule (operator role; decision 0019 §6) — create (or
 * replace) one, list them, pause, resume, delete. The leader supervisor fires each tick once, as task
 * `sch:<name>:<tick>`.
 */
import type { Command } from 'commander';
import type { Schedule } from '@triad/protocol';
import { isoTime, table, timingText } from '../format.js';

export { everyText, timingText } from '../format.js';
import { intArg, out, parseJson, printJson, usageError } from '../io.js';
import { action, connectionOptions, examples, optionsOf } from '../options.js';

const INPUT_EXAMPLE = `--input '{"region":"eu"}'`;

export function schedulesTable(list: readonly Schedule[]): string {
  return table(
    ['NAME', 'WORKFLOW', 'WHEN', 'OVERLAP', 'PAUSED', 'NEXT TICK', 'LAST TICK', 'LAST TASK', 'FIRED', 'SKIPPED', 'MISSED'],
    list.map((s) => [s.name, s.version !== undefined ? `${s.workflow}@${s.version}` : s.workflow, timingText(s), s.overlap, s.paused ? 'yes' : 'no', isoTime(s.nextTick), isoTime(s.lastTick), s.lastTaskId, s.fired, s.skipped, s.missed]),
  );
}

interface CreateOptions {
  workflow: string;
  every?: string;
  cron?: string;
  timezone?: string;
  input?: string;
  overlap: string;
  version?: number;
  client?: string;
  replace?: boolean;
  json?: boolean;
}

export function register(program: Command): void {
  const group = program
    .command('schedules')
    .description('tasks submitted on a schedule (operator): every interval or by a cron pattern, each tick once, by the leader supervisor')
    .option('--json', 'print the schedules as a JSON array');
  connectionOptions(group);
  examples(group, [
    `triad schedules create nightly --workflow report --cron "0 2 * * *" --timezone Europe/Paris ${INPUT_EXAMPLE}`,
    'triad schedules create heartbeat --workflow ping --every 10s --overlap allow',
    'triad schedules list --json',
    'triad schedules pause nightly',
    'triad schedules resume nightly',
    'triad schedules delete nightly',
  ]);
  const list = async (self: Command): Promise<number> => {
    const { withClient } = await import('../runtime.js');
    const o = optionsOf<{ json?: boolean }>(self);
    return withClient(self, async (client) => {
      const all = await client.listSchedules();
      if (o.json) printJson(all);
      else out(all.length === 0 ? 'no schedules (create one with: triad schedules create <name> --workflow <wf> --every 10s)' : schedulesTable(all));
      return 0;
    });
  };
  group.action(action(async (_opts: unknown, self: Command) => list(self)));

  const ls = group.command('list').description('every schedule, paused ones included: how it fires, its next and last tick, the last task, and its counts').option('--json', 'print the schedules as a JSON array');
  connectionOptions(ls);
  ls.action(action(async (_opts: unknown, self: Command) => list(self)));

  const create = group
    .command('create')
    .argument('<name>', 'the schedule name (letters, digits, "_", "-"); its tasks are sch:<name>:<tick>')
    .description('create a schedule: a task of --workflow with --input at every tick (--every or --cron); an existing name needs --replace')
    .requiredOption('--workflow <name>', 'the registered workflow each tick submits')
    .option('--every <duration>', 'an interval: 500ms, 10s, 5m, 2h, 1d (1 s to 30 days), counted from the creation')
    .option('--cron <pattern>', 'a cron pattern: 5 fields (minute hour day-of-month month day-of-week), 6 with seconds first')
    .option('--timezone <zone>', "the cron pattern's IANA time zone (default UTC)")
    .option('--input <json>', "each task's input as JSON (default: none)")
    .option('--overlap <skip|allow>', 'skip a tick while the previous task still runs (skip, the default), or run them side by side (allow)', 'skip')
    .option('--version <n>', 'pin a workflow version (default: the latest at each tick)', intArg(1))
    .option('--client <id>', "the client the tasks belong to (default: this identity's client id)")
    .option('--replace', 'change an existing schedule (what it fired is kept: no tick fires twice)')
    .option('--json', 'print the schedule as JSON');
  connectionOptions(create);
  create.action(
    action(async (name: string, _opts: unknown, self: Command) => {
      const o = optionsOf<CreateOptions>(self);
      // Checked before connecting: a bad timing or input never needs a server to be reported.
      if ((o.every === undefined) === (o.cron === undefined)) throw usageError('give exactly one of --every (e.g. 10s) and --cron (e.g. "0 2 * * *")');
      if (o.overlap !== 'skip' && o.overlap !== 'allow') throw usageError(`--overlap is skip or allow, not "${o.overlap}"`);
      const { cronProblems, parseEvery } = await import('@triad/core');
      if (o.every !== undefined) {
        if (o.timezone !== undefined) throw usageError('--timezone applies to --cron only: an --every schedule counts from its creation; drop --timezone');
        try {
          parseEvery(o.every);
        } catch (e) {
          throw usageError(e instanceof Error ? e.message : String(e));
        }
      } else {
        const problems = cronProblems(o.cron ?? '', o.timezone);
        if (problems.length > 0) throw usageError(problems.join('; '), problems);
      }
      const input = o.input === undefined ? undefined : parseJson(o.input, '--input', INPUT_EXAMPLE);
      const { withClient } = await import('../runtime.js');
      return withClient(self, async (client) => {
        const s = await client.createSchedule(name, {
          workflow: o.workflow,
          overlap: o.overlap as 'skip' | 'allow',
          ...(o.every !== undefined ? { every: o.every } : {}),
          ...(o.cron !== undefined ? { cron: o.cron } : {}),
          ...(o.timezone !== undefined ? { timezone: o.timezone } : {}),
          ...(input !== undefined ? { input } : {}),
          ...(o.version !== undefined ? { version: o.version } : {}),
          ...(o.client !== undefined ? { client: o.client } : {}),
          ...(o.replace ? { replace: true } : {}),
        });
        if (o.json) printJson(s);
        else out(`schedule ${s.name} ${s.created ? 'created' : 'replaced'}: ${timingText(s)}, workflow ${s.workflow}, tasks of client ${s.client}; next tick ${isoTime(s.nextTick)} (task sch:${s.name}:${s.nextTick ?? '<tick>'})`);
        return 0;
      });
    }),
  );

  const simple = (verb: 'pause' | 'resume' | 'delete', what: string): void => {
    const cmd = group.command(verb).argument('<name>', 'the schedule name').description(what).option('--json', 'print the reply as JSON');
    connectionOptions(cmd);
    cmd.action(
      action(async (name: string, _opts: unknown, self: Command) => {
        const { withClient } = await import('../runtime.js');
        const o = optionsOf<{ json?: boolean }>(self);
        return withClient(self, async (client) => {
          if (verb === 'delete') {
            const r = await client.deleteSchedule(name);
            if (o.json) printJson(r);
            else out(`schedule ${name} deleted; tasks it already fired run on`);
            return 0;
          }
          const s = verb === 'pause' ? await client.pauseSchedule(name) : await client.resumeSchedule(name);
          if (o.json) printJson(s);
          else out(s.paused ? `schedule ${name} paused: no tick fires until triad schedules resume ${name}` : `schedule ${name} resumed: next tick ${isoTime(s.nextTick)} (the paused period is not caught up)`);
          return 0;
        });
      }),
    );
  };
  simple('pause', 'stop firing a schedule until it is resumed');
  simple('resume', 'fire a paused schedule again, from now on (the ticks of the paused period are not caught up)');
  simple('delete', 'remove a schedule (tasks it already fired run on)');
}
