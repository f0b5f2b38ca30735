/**
 * `triad limits`: dispatch limits per agent type (operator role, decision 0020) — at most N attempts at
 * once and R dispatches a second across every scheduler and agent process, per key value too; steps over
 * a limit wait in line (fair across keys, by priority) and start when capacity frees.
 */
import type { Command } from 'commander';
import { InvalidArgumentError } from 'commander';
import type { AgentLimit } from '@triad/protocol';
import { agentLimitProblems, parseRate } from '@triad/protocol/constants';
import { describeLimit, limitsTable } from '../limits-text.js';
import { err, intArg, out, printJson, usageError } from '../io.js';
import { action, connectionOptions, examples, optionsOf } from '../options.js';

export { describeLimit, limitsTable } from '../limits-text.js';

function rateArg(flag: string): (value: string) => number {
  return (value) => {
    const r = parseRate(value, flag);
    if (!r.ok) throw new InvalidArgumentError(r.message);
    return r.perSecond;
  };
}

interface SetOptions {
  concurrency?: number;
  rate?: number;
  burst?: number;
  key?: string;
  perKeyConcurrency?: number;
  perKeyRate?: number;
  perKeyBurst?: number;
  pausePerKey?: boolean;
  json?: boolean;
}

/** The limit the flags describe, or a usage error listing every problem (exit code 2, before anything is sent). */
export function limitFromFlags(agent: string, o: SetOptions): AgentLimit {
  const l: AgentLimit = {
    agent,
    ...(o.concurrency !== undefined ? { concurrency: o.concurrency } : {}),
    ...(o.rate !== undefined ? { ratePerSecond: o.rate } : {}),
    ...(o.burst !== undefined ? { burst: o.burst } : {}),
    ...(o.key !== undefined ? { key: o.key } : {}),
    ...(o.perKeyConcurrency !== undefined ? { perKeyConcurrency: o.perKeyConcurrency } : {}),
    ...(o.perKeyRate !== undefined ? { perKeyRatePerSecond: o.perKeyRate } : {}),
    ...(o.perKeyBurst !== undefined ? { perKeyBurst: o.perKeyBurst } : {}),
    ...(o.pausePerKey ? { pausePerKey: true } : {}),
  };
  const problems = agentLimitProblems(l);
  if (o.key !== undefined && !/^input(\.[^.\s]{1,64}){1,8}$/.test(o.key)) problems.unshift({ path: 'key', message: "--key must be input.<path> (e.g. input.customerId or input.customer.id): the key is read from each task's input" });
  if (problems.length > 0) throw usageError(problems[0]?.message ?? 'invalid limit', problems.slice(1).map((p) => p.message));
  return l;
}

export function register(program: Command): void {
  const limits = program
    .command('limits')
    .description('dispatch limits per agent type (operator): at most N attempts at once and R a second across the fleet; steps over it wait in line')
    .option('--agent <agent>', 'only this agent type')
    .option('--keys [n]', 'also each agent type\'s n keys with the most waiting (default 10)')
    .option('--json', 'print them as a JSON array');
  connectionOptions(limits);
  examples(limits, ['triad limits', 'triad limits set payment --concurrency 20 --rate 100/s --burst 20', 'triad limits set payment --concurrency 3 --key input.customerId --per-key-concurrency 1', 'triad limits list --keys', 'triad limits clear payment']);
  const listAction = action(async (_opts: unknown, self: Command) => {
    const { withClient } = await import('../runtime.js');
    const o = optionsOf<{ agent?: string; keys?: string | boolean; json?: boolean }>(self);
    const keys = o.keys === undefined || o.keys === false ? 0 : o.keys === true ? 10 : intArg(0, 100)(o.keys);
    return withClient(self, async (client) => {
      const ls = await client.agentLimits({ ...(o.agent !== undefined ? { agent: o.agent } : {}), keys });
      if (o.json) printJson(ls);
      else out(ls.length === 0 ? 'no dispatch limits: every step is sent to its agents as soon as it is ready' : limitsTable(ls));
      return 0;
    });
  });
  limits.action(listAction);

  const list = limits
    .command('list')
    .description('the dispatch limits, with what is in flight, waiting and the rate now per agent type (and key)')
    .option('--agent <agent>', 'only this agent type')
    .option('--keys [n]', "also each agent type's n keys with the most waiting (default 10)")
    .option('--json', 'print them as a JSON array');
  connectionOptions(list);
  list.action(listAction);

  const set = limits
    .command('set')
    .argument('<agent>', 'the agent type')
    .description("set an agent type's dispatch limit (replaces its whole limit; every scheduler applies it within 1 s)")
    .option('--concurrency <n>', 'at most n attempts of this agent type at once (runs and compensations)', intArg(1, 100_000))
    .option('--rate <rate>', 'dispatches a second on average: 100/s, 600/m, 1/h, or a bare number per second', rateArg('--rate'))
    .option('--burst <n>', 'dispatches let through at once above the rate (default 1)', intArg(1, 100_000))
    .option('--key <input.path>', "the task input's value that makes a step's key: keys take turns, and the per-key limits apply to each")
    .option('--per-key-concurrency <n>', 'at most n attempts at once per key value', intArg(1, 100_000))
    .option('--per-key-rate <rate>', 'dispatches a second per key value', rateArg('--per-key-rate'))
    .option('--per-key-burst <n>', 'per key value above --per-key-rate (default 1)', intArg(1, 100_000))
    .option('--pause-per-key', "a service's Retry-After pauses only the throttled step's key")
    .option('--json', 'print { limit, previous, warnings } as JSON');
  connectionOptions(set);
  set.action(
    action(async (agent: string, _opts: unknown, self: Command) => {
      const o = optionsOf<SetOptions>(self);
      const l = limitFromFlags(agent, o);
      const { withClient } = await import('../runtime.js');
      return withClient(self, async (client) => {
        const r = await client.setAgentLimit(agent, l);
        if (o.json) printJson(r);
        else {
          out(`${agent}: ${describeLimit(r.limit)} — every scheduler applies it within 1 s${r.previous ? ` (was: ${describeLimit(r.previous)})` : ''}`);
          for (const w of r.warnings) err(`warning: ${w}`);
        }
        return 0;
      });
    }),
  );

  const clear = limits.command('clear').argument('<agent>', 'the agent type').description("remove an agent type's dispatch limit: its waiting steps go at once").option('--json', 'print { agent, cleared, waiting } as JSON');
  connectionOptions(clear);
  clear.action(
    action(async (agent: string, _opts: unknown, self: Command) => {
      const { withClient } = await import('../runtime.js');
      const o = optionsOf<{ json?: boolean }>(self);
      return withClient(self, async (client) => {
        const r = await client.clearAgentLimit(agent);
        if (o.json) printJson(r);
        else out(r.cleared ? `removed the limit of ${agent}${r.waiting > 0 ? `: its ${r.waiting} waiting steps are being let go` : ''}` : `${agent} had no limit`);
        return 0;
      });
    }),
  );
}
