/**
 * `triad limits`: dispatch limits per agent type (operator role, decision 0020) — at most N attempts at
 * once and R dispatches a second across every scheduler and agent process, per key value too; steps over
 * a limit wait in line (fair across keys, by priority) and start when capacity frees.
 */
import type { Command } from 'commander';
import { InvalidArgumentError } from 'commander';
import type { AgentLimit, AgentLimitStatus, StoredAgentLimit } from '@triad/protocol';
import { agentLimitProblems, formatRate, parseRate } from '@triad/protocol/constants';
import { clock, duration, table } from '../format.js';
import { err, intArg, out, printJson, usageError } from '../io.js';
import { action, connectionOptions, examples, optionsOf } from '../options.js';

function rateArg(flag: string): (value: string) => number {
  return (value) => {
    const r = parseRate(value, flag);
    if (!r.ok) throw new InvalidArgumentError(r.message);
    return r.perSecond;
  };
}

/** One limit in words: `at most 20 at once, 100/s (burst 20); per input.customerId: at most 2 at once`. */
export function describeLimit(l: Omit<StoredAgentLimit, 'agent' | 'setAt'>): string {
  const parts: string[] = [];
  if (l.concurrency !== undefined) parts.push(`at most ${l.concurrency} at once`);
  if (l.ratePerSecond !== undefined) parts.push(`${formatRate(l.ratePerSecond)}${l.burst !== undefined && l.burst > 1 ? ` (burst ${l.burst})` : ''}`);
  const perKey: string[] = [];
  if (l.perKeyConcurrency !== undefined) perKey.push(`at most ${l.perKeyConcurrency} at once`);
  if (l.perKeyRatePerSecond !== undefined) perKey.push(`${formatRate(l.perKeyRatePerSecond)}${l.perKeyBurst !== undefined && l.perKeyBurst > 1 ? ` (burst ${l.perKeyBurst})` : ''}`);
  if (l.pausePerKey) perKey.push('a Retry-After pauses only its key');
  let text = parts.join(', ');
  if (l.key !== undefined) text += `${text ? '; ' : ''}per ${l.key}: ${perKey.length > 0 ? perKey.join(', ') : 'keys take turns'}`;
  return text || 'no limit';
}

/** `triad limits list`'s table (decision 0020 §6). */
export function limitsTable(ls: readonly AgentLimitStatus[], now: number = Date.now()): string {
  const rows = ls.map((s) => {
    const l = s.limit;
    return [
      s.agent,
      s.inFlight,
      l?.concurrency ?? '—',
      `${Math.round(s.ratePerSecondNow * 10) / 10}/s`,
      l?.ratePerSecond !== undefined ? `${formatRate(l.ratePerSecond)}${l.burst !== undefined && l.burst > 1 ? ` (${l.burst})` : ''}` : '—',
      s.waiting,
      s.oldestWaitMs !== undefined ? duration(s.oldestWaitMs) : '—',
      l?.key ?? '—',
      l?.key !== undefined ? describeLimit({ ...(l.perKeyConcurrency !== undefined ? { perKeyConcurrency: l.perKeyConcurrency } : {}), ...(l.perKeyRatePerSecond !== undefined ? { perKeyRatePerSecond: l.perKeyRatePerSecond } : {}) }).replace(/^no limit$/, 'turns') : '—',
      s.draining ? 'draining (cleared)' : s.pausedUntil !== undefined && s.pausedUntil > now ? `until ${clock(s.pausedUntil).slice(0, 8)} (Retry-After)` : '—',
    ];
  });
  let text = `dispatch limits (per agent type)\n${table(['AGENT', 'IN FLIGHT', 'LIMIT', 'RATE NOW', 'RATE', 'WAITING', 'OLDEST', 'KEY', 'PER KEY', 'PAUSED'], rows)}`;
  for (const s of ls) {
    if (!s.keys || s.keys.length === 0) continue;
    text += `\n\n${s.agent}: keys with the most waiting\n${table(
      ['KEY', 'IN FLIGHT', 'WAITING', 'OLDEST', 'BLOCKED'],
      s.keys.map((k) => [k.key === '' ? '(none)' : k.key, k.inFlight, k.waiting, k.oldestWaitMs !== undefined ? duration(k.oldestWaitMs) : '—', k.blockedUntil === 'concurrency' ? 'at its limit' : k.blockedUntil !== undefined ? `until ${clock(k.blockedUntil).slice(0, 8)}` : '—']),
    )}`;
  }
  return text;
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
