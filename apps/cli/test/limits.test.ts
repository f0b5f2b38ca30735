// `triad limits` (decision 0020 §1.8, §6): the flags' rules checked before anything is sent (each message
// of the decision, exit code 2), rates as people write them, and the words and table it prints.
import { describe, expect, it } from 'vitest';
import { AgentLimitSchema, formatRate, parseRate } from '@triad/protocol';
import { describeLimit, limitFromFlags, limitsTable } from '../src/commands/limits.js';
import { clock } from '../src/format.js';

const problem = (o: Parameters<typeof limitFromFlags>[1]): string => {
  try {
    limitFromFlags('payment', o);
  } catch (e) {
    expect((e as { exitCode?: number }).exitCode).toBe(2);
    return (e as Error).message;
  }
  throw new Error('expected a usage error');
};

describe('triad limits set', () => {
  it('refuses what limits nothing, and flags that need another, with what to add', () => {
    expect(problem({})).toBe('a limit needs --concurrency, --rate, --per-key-concurrency, --per-key-rate or --pause-per-key (to remove one: triad limits clear payment)');
    expect(problem({ key: 'input.customerId' })).toBe('--key alone limits nothing: add --concurrency or --rate (its steps then take turns by key), or a per-key limit');
    expect(problem({ concurrency: 3, burst: 5 })).toBe('--burst applies to --rate: add --rate (e.g. --rate 100/s --burst 20)');
    expect(problem({ concurrency: 3, perKeyConcurrency: 1 })).toBe('--per-key-concurrency limits each value of --key separately: add --key (e.g. --key input.customerId)');
    expect(problem({ concurrency: 3, key: 'input.c', perKeyBurst: 2 })).toBe('--per-key-burst applies to --per-key-rate: add --per-key-rate (e.g. --per-key-rate 10/s)');
    expect(problem({ concurrency: 3, key: 'customerId' })).toBe("--key must be input.<path> (e.g. input.customerId or input.customer.id): the key is read from each task's input");
    expect(limitFromFlags('payment', { concurrency: 3, rate: 20, burst: 5 })).toEqual({ agent: 'payment', concurrency: 3, ratePerSecond: 20, burst: 5 });
  });

  it('the API refuses the same, at the field', () => {
    const r = AgentLimitSchema.safeParse({ agent: 'payment', burst: 5 });
    expect(r.success).toBe(false);
    expect(r.error?.issues.map((i) => [i.path.join('.'), i.message])).toEqual([
      ['concurrency', 'a limit needs --concurrency, --rate, --per-key-concurrency, --per-key-rate or --pause-per-key (to remove one: triad limits clear payment)'],
      ['burst', '--burst applies to --rate: add --rate (e.g. --rate 100/s --burst 20)'],
    ]);
    expect(AgentLimitSchema.safeParse({ agent: 'payment', concurrency: 0 }).error?.issues[0]?.message).toBe('--concurrency: expected a whole number from 1 to 100000');
  });

  it('reads rates as 100/s, 600/m, 1/h or a bare number per second, and says what is wrong', () => {
    expect(parseRate('100/s')).toEqual({ ok: true, perSecond: 100 });
    expect(parseRate('600/m')).toEqual({ ok: true, perSecond: 10 });
    expect(parseRate('20')).toEqual({ ok: true, perSecond: 20 });
    expect(parseRate('0.5/s')).toEqual({ ok: true, perSecond: 0.5 });
    expect(parseRate('100 per s')).toEqual({ ok: false, message: '--rate "100 per s" is not a rate: write <count>/s, /m or /h (e.g. 100/s, 600/m, 0.5/s); a bare number is per second' });
    expect(parseRate('0.1/h')).toEqual({ ok: false, message: '--rate 0.1/h is too slow: at least 1/h' });
    expect(parseRate('500000/s')).toEqual({ ok: false, message: '--rate 500000/s is above 100000/s' });
    expect([formatRate(100), formatRate(0.1), formatRate(1 / 3600)]).toEqual(['100/s', '6/m', '1/h']);
  });

  it('describes a limit in words, and lists limits as a table', () => {
    expect(describeLimit({ concurrency: 20, ratePerSecond: 100, burst: 20, key: 'input.customerId', perKeyConcurrency: 2 })).toBe('at most 20 at once, 100/s (burst 20); per input.customerId: at most 2 at once');
    const text = limitsTable([{ agent: 'payment', limit: { agent: 'payment', concurrency: 20, setAt: 0 }, inFlight: 20, waiting: 1234, oldestWaitMs: 12_400, ratePerSecondNow: 98.2 }]);
    expect(text).toContain('AGENT');
    expect(text).toMatch(/payment\s+20\s+20\s+98\.2\/s\s+—\s+1,234/);
  });

  it("lists each agent type's keys with --keys: in flight, waiting, oldest, and what blocks a key (decision 0020 §6)", () => {
    const now = 1_700_000_000_000;
    const hh = (ms: number): string => clock(ms).slice(0, 8);
    const text = limitsTable(
      [
        {
          agent: 'payment',
          limit: { agent: 'payment', concurrency: 20, key: 'input.customerId', perKeyConcurrency: 2, setAt: 0 },
          inFlight: 3,
          waiting: 7,
          ratePerSecondNow: 1,
          keys: [
            { key: 'c-42', inFlight: 2, waiting: 5, oldestWaitMs: 8_100, blockedUntil: 'concurrency' },
            { key: 'c-7', inFlight: 0, waiting: 1, blockedUntil: now + 1_000 },
            { key: 'c-9', inFlight: 0, waiting: 1, pausedUntil: now + 3_000, blockedUntil: now + 3_000 },
            { key: '', inFlight: 1, waiting: 0 },
          ],
        },
      ],
      now,
    );
    expect(text).toContain('payment: keys with the most waiting');
    expect(text).toMatch(/^KEY\s+IN FLIGHT\s+WAITING\s+OLDEST\s+BLOCKED$/m);
    expect(text).toMatch(/^c-42\s+2\s+5\s+8\.1s\s+at 2 at once$/m);
    expect(text).toMatch(new RegExp(`^c-7\\s+0\\s+1\\s+—\\s+rate until ${hh(now + 1_000)}$`, 'm'));
    expect(text).toMatch(new RegExp(`^c-9\\s+0\\s+1\\s+—\\s+paused until ${hh(now + 3_000)}$`, 'm'));
    expect(text).toMatch(/^\(none\)\s+1\s+0\s+—\s+—$/m);
  });
});
