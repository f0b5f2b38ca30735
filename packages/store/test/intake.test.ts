// Per-client submission rate limits on a real redis-server (decision 0022): the stored limits (`*` for
// every client without its own), and takeIntakeSlot.lua's cell-rate algorithm with reserved slots — a
// burst goes through, the rest get slots one interval apart, and a submission that comes back for its
// slot is taken without reserving another.
import { describe, expect, it } from 'vitest';
import { type ClientLimit } from '@triad/protocol';
import { silentLogger } from '@triad/telemetry';
import { IntakeStore } from '../src/index.js';
import { usePrivateRedis } from './redis-server.js';

const r = usePrivateRedis('triad-intake-test');
let nsCounter = 0;
function store(): IntakeStore {
  return new IntakeStore(r(), `in${process.pid}-${++nsCounter}`);
}
const T0 = 1_700_000_000_000;
const limit = (client: string, ratePerSecond: number, burst: number): ClientLimit => ({ client, ratePerSecond, burst, setAt: T0 });

describe('stored limits', () => {
  it('are set, listed (`*` first), applied to a client (its own, else `*`) and cleared', async () => {
    const s = store();
    expect(await s.limitFor('alice', T0)).toBeUndefined();
    await s.setLimit(limit('bob', 5, 5));
    await s.setLimit(limit('*', 1, 2));
    await s.setLimit(limit('alice', 20, 40));
    expect((await s.limits()).map((l) => l.client)).toEqual(['*', 'alice', 'bob']);
    expect(await s.limitFor('alice', T0)).toMatchObject({ ratePerSecond: 20, burst: 40 });
    expect(await s.limitFor('carol', T0)).toMatchObject({ client: '*', ratePerSecond: 1 });
    expect(await s.clearLimit('alice')).toBe(true);
    expect(await s.clearLimit('alice')).toBe(false);
    // A change made here is seen at once, not after the cache's 2 s.
    expect(await s.limitFor('alice', T0)).toMatchObject({ client: '*' });
  });

  it('skips an entry that does not parse, and says so', async () => {
    const warned: string[] = [];
    const s = new IntakeStore(r(), `in${process.pid}-${++nsCounter}`, { ...silentLogger, warn: (_o, m) => void warned.push(m ?? '') });
    await r().hset(s.keys.intakeLimits, 'broken', '{not json', 'bad', JSON.stringify({ ratePerSecond: -1, burst: 1, setAt: T0 }));
    await s.setLimit(limit('ok', 1, 1));
    expect((await s.limits()).map((l) => l.client)).toEqual(['ok']);
    expect(warned).toHaveLength(2);
  });
});

describe('takeIntakeSlot', () => {
  it('lets a burst through, then reserves one slot per submission one interval apart', async () => {
    const s = store();
    const l = limit('alice', 10, 2); // one every 100 ms, two at once
    expect(await s.take('alice', 't1', l, T0)).toBe(0);
    expect(await s.take('alice', 't2', l, T0)).toBe(0);
    expect(await s.take('alice', 't3', l, T0)).toBe(100);
    expect(await s.take('alice', 't4', l, T0)).toBe(200);
    // t3 coming back early keeps its slot (no second reservation: t5 comes after t4's).
    expect(await s.take('alice', 't3', l, T0 + 50)).toBe(50);
    expect(await s.take('alice', 't5', l, T0 + 50)).toBe(250);
    // At its slot it is taken, and its reservation gone.
    expect(await s.take('alice', 't3', l, T0 + 100)).toBe(0);
    expect(await r().hexists(s.keys.intakeState('alice'), 'r:t3')).toBe(0);
    // Another client's allowance is its own.
    expect(await s.take('bob', 'b1', l, T0 + 100)).toBe(0);
  });

  it('an idle client gets its whole burst back; its state expires an hour after its last slot', async () => {
    const s = store();
    const l = limit('alice', 1, 3);
    for (const id of ['a', 'b', 'c']) expect(await s.take('alice', id, l, T0)).toBe(0);
    expect(await s.take('alice', 'd', l, T0)).toBe(1_000);
    for (const id of ['e', 'f', 'g']) expect(await s.take('alice', id, l, T0 + 60_000)).toBe(0);
    const ttl = await r().pttl(s.keys.intakeState('alice'));
    expect(ttl).toBeGreaterThan(3_600_000 - 10_000);
    expect(ttl).toBeLessThanOrEqual(3_600_000 + 3_000);
  });
});
