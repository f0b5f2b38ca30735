/**
 * `triad intake`: per-client submission rate limits (operator role, decision 0022) — list them, set one
 * for a client (or `*`: every client without its own), clear one. Stored in Redis by the schedulers.
 */
import type { Command } from 'commander';
import { InvalidArgumentError } from 'commander';
import type { ClientLimit } from '@triad/protocol';
import { isoTime, table } from '../format.js';
import { intArg, out, printJson } from '../io.js';
import { action, connectionOptions, examples, optionsOf } from '../options.js';

/** A rate in submissions per second: a positive number (fractions allowed: 0.5 is one every 2 s). */
function rateArg(value: string): number {
  const n = /^\s*\d+(\.\d+)?\s*$/.test(value) ? Number(value) : Number.NaN;
  if (!Number.isFinite(n) || n < 0.001 || n > 100_000) throw new InvalidArgumentError(`Expected submissions per second from 0.001 to 100000 (e.g. 20 or 0.5), got "${value}".`);
  return n;
}

function limitRows(limits: readonly ClientLimit[]): string {
  return table(['CLIENT', 'RATE/S', 'BURST', 'SET'], limits.map((l) => [l.client === '*' ? '* (every other client)' : l.client, l.ratePerSecond, l.burst, isoTime(l.setAt)]));
}

export function register(program: Command): void {
  const limits = program
    .command('intake')
    .description("per-client submission rate limits (operator): a client's submissions over its rate wait at the scheduler until their turn")
    .option('--json', 'print them as a JSON array');
  connectionOptions(limits);
  examples(limits, ['triad intake', "triad intake set alice --rate 20 --burst 50", "triad intake set '*' --rate 100", 'triad intake clear alice']);
  limits.action(
    action(async (_opts: unknown, self: Command) => {
      const { withClient } = await import('../runtime.js');
      const o = optionsOf<{ json?: boolean }>(self);
      return withClient(self, async (client) => {
        const ls = await client.intakeLimits();
        if (o.json) printJson(ls);
        else out(ls.length === 0 ? 'no submission rate limits: every client submits as fast as the schedulers take them' : limitRows(ls));
        return 0;
      });
    }),
  );

  const set = limits
    .command('set')
    .argument('<client>', "the client id, or '*' for every client without a limit of its own")
    .description("set a client's submission rate limit: at most --rate submissions a second on average, --burst at once")
    .requiredOption('--rate <perSecond>', 'submissions per second (fractions allowed: 0.5 is one every 2 s)', rateArg)
    .option('--burst <n>', 'submissions let through at once before the rate applies (default: the rate, at least 1)', intArg(1, 100_000))
    .option('--json', 'print the stored limit as JSON');
  connectionOptions(set);
  set.action(
    action(async (target: string, _opts: unknown, self: Command) => {
      const { withClient } = await import('../runtime.js');
      const o = optionsOf<{ rate: number; burst?: number; json?: boolean }>(self);
      return withClient(self, async (client) => {
        const l = await client.setIntakeLimit(target, { ratePerSecond: o.rate, ...(o.burst !== undefined ? { burst: o.burst } : {}) });
        if (o.json) printJson(l);
        else out(`${l.client === '*' ? 'every client without a limit of its own' : `client ${l.client}`}: at most ${l.ratePerSecond} submissions a second, ${l.burst} at once (every scheduler applies it within 2 s)`);
        return 0;
      });
    }),
  );

  const clear = limits
    .command('clear')
    .argument('<client>', "the client id, or '*'")
    .description("remove a client's submission rate limit")
    .option('--json', 'print { client, cleared } as JSON');
  connectionOptions(clear);
  clear.action(
    action(async (target: string, _opts: unknown, self: Command) => {
      const { withClient } = await import('../runtime.js');
      const o = optionsOf<{ json?: boolean }>(self);
      return withClient(self, async (client) => {
        const r = await client.clearIntakeLimit(target);
        if (o.json) printJson(r);
        else out(r.cleared ? `removed the limit of ${target}` : `${target} had no limit`);
        return 0;
      });
    }),
  );
}
