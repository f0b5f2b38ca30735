// Decision 0020 increment 2 on a real redis-server: each limiter script on its own. Grants never exceed
// the concurrency or the rate across callers; permits lapse at complete-by + 1 s; the fair order (priority
// levels with aging, keys in turn, first come first served within a key); idempotent queueing, dequeues,
// releases with requeue, pauses, per-call caps, place, stats, retire; the registry and the LimitCache.
import { describe, expect, it } from 'vitest';
import { Redis } from 'ioredis';
import { LimitCache, LimitStore, PERMIT_GRACE_MS, PRIORITY_AGING_MS, type Grant, type LimitConfig, type QueueItem } from '../src/index.js';
import { usePrivateRedis } from './redis-server.js';

const r = usePrivateRedis('triad-limits-test');
const T0 = 1_700_000_000_000;
let n = 0;
const ns = (): string => `lim${process.pid}-${++n}`;

/** A queue item for ticket `<task>|s|run|1` (budget 1 s unless given). */
function item(task: string, o: Partial<QueueItem> = {}): QueueItem {
  return { ticket: `${task}|s|run|1`, taskId: task, phase: 's', kind: 'run', key: '', priority: 3, firstAt: T0, budgetMs: 1_000, ...o };
}
const tickets = (gs: readonly Grant[]): string[] => gs.map((g) => g.taskId);

async function limited(limit: LimitConfig | undefined, agent = 'payment'): Promise<LimitStore> {
  const s = new LimitStore(r(), ns());
  await s.configure(agent, limit, T0);
  return s;
}

describe('a changed rate', () => {
  it('rescales what the rate owes: raised from 1/h to 20/s, the waiting steps go at the new rate at once', async () => {
    const s = await limited({ ratePerSecond: 1 / 3600 });
    const a = await s.apply('payment', { queue: ['t1', 't2', 't3'].map((t) => item(t)) }, T0);
    expect(tickets(a.grants)).toEqual(['t1']);
    expect(a.wakeAt).toBe(T0 + 3_600_000);
    const b = await s.configure('payment', { ratePerSecond: 20 }, T0 + 10);
    expect(tickets(b.grants)).toEqual([]);
    // The one grant owed at 1/h is one grant owed at 20/s: 50 ms after the change.
    expect(b.wakeAt).toBe(T0 + 60);
    expect(tickets((await s.pump('payment', T0 + 60)).grants)).toEqual(['t2']);
    // Lowered again, the one grant owed (50 ms at 20/s) becomes one at 1/s.
    const c = await s.configure('payment', { ratePerSecond: 1 }, T0 + 60);
    expect(c.wakeAt).toBe(T0 + 1_060);
  });
});

describe('concurrency', () => {
  it('grants up to the concurrency, says when to look again, and grants the next on a release', async () => {
    const s = await limited({ concurrency: 2 });
    const a = await s.apply('payment', { queue: ['t1', 't2', 't3', 't4'].map((t) => item(t)) }, T0);
    expect(tickets(a.grants)).toEqual(['t1', 't2']);
    expect(a.grants[0]).toMatchObject({ ticket: 't1|s|run|1', phase: 's', kind: 'run', completeBy: T0 + 1_000, waitedMs: 0 });
    expect(a).toMatchObject({ waiting: 2, limited: true, wakeAt: T0 + 1_000 + PERMIT_GRACE_MS });
    const b = await s.apply('payment', { release: [{ ticket: 't1|s|run|1' }] }, T0 + 10);
    expect(tickets(b.grants)).toEqual(['t3']);
    expect(b.grants[0]).toMatchObject({ completeBy: T0 + 1_010, waitedMs: 10 });
    expect(await s.stats('payment', T0 + 10)).toMatchObject({ inFlight: 2, waiting: 1, granted: 3, released: 1, oldestWaitMs: 10 });
  });

  it('lets a permit lapse at its complete-by + 1 s, not before, when nothing releases it', async () => {
    const s = await limited({ concurrency: 1 });
    expect(tickets((await s.apply('payment', { queue: [item('t1'), item('t2')] }, T0)).grants)).toEqual(['t1']);
    // Live until complete-by (T0 + 1000) + grace.
    expect((await s.pump('payment', T0 + 1_000 + PERMIT_GRACE_MS - 1)).grants).toEqual([]);
    const later = await s.pump('payment', T0 + 1_000 + PERMIT_GRACE_MS);
    expect(tickets(later.grants)).toEqual(['t2']);
    // The reply says how many permits this call reclaimed (triad_limit_reclaimed_total); a plain one says nothing.
    expect(later.reclaimed).toBe(1);
    expect((await s.pump('payment', T0 + 1_000 + PERMIT_GRACE_MS)).reclaimed).toBeUndefined();
    expect(await s.stats('payment', T0 + 2_000)).toMatchObject({ inFlight: 1, waiting: 0, reclaimed: 1 });
    // A release of the lapsed permit changes nothing (it is not counted twice).
    await s.apply('payment', { release: [{ ticket: 't1|s|run|1' }] }, T0 + 2_001);
    expect(await s.stats('payment', T0 + 2_001)).toMatchObject({ inFlight: 1, released: 0 });
  });

  it('never lets more permits live than the concurrency across callers on separate connections', async () => {
    const namespace = ns();
    const other = new Redis(r().options);
    try {
      const stores = [new LimitStore(r(), namespace), new LimitStore(other, namespace)];
      await stores[0]!.configure('payment', { concurrency: 3 }, T0);
      const held = new Set<string>();
      let most = 0;
      let now = T0;
      const grantsOf = (gs: readonly Grant[]): void => {
        for (const g of gs) {
          expect(held.has(g.ticket), `${g.ticket} granted twice`).toBe(false);
          held.add(g.ticket);
        }
        most = Math.max(most, held.size);
      };
      for (let round = 0; round < 20; round++) {
        now += 5;
        const releases = [...held].slice(0, round % 3);
        for (const t of releases) held.delete(t);
        // Both callers at once: one queues, the other releases and pumps.
        const [x, y] = await Promise.all([
          stores[0]!.apply('payment', { queue: [0, 1, 2].map((i) => item(`r${round}-${i}`, { budgetMs: 60_000 })) }, now),
          stores[1]!.apply('payment', { release: releases.map((ticket) => ({ ticket })) }, now),
        ]);
        grantsOf(x.grants);
        grantsOf(y.grants);
        expect(held.size).toBeLessThanOrEqual(3);
        expect((await stores[1]!.stats('payment', now)).inFlight).toBe(held.size);
      }
      expect(most).toBe(3);
    } finally {
      other.disconnect();
    }
  });
});

describe('rate', () => {
  it('grants the burst at once, then one per interval; no window of T ms holds more than burst + T / I', async () => {
    const s = await limited({ ratePerSecond: 10, burst: 3 });
    const first = await s.apply('payment', { queue: Array.from({ length: 20 }, (_, i) => item(`t${i}`, { budgetMs: 60_000 })) }, T0);
    expect(first.grants).toHaveLength(3);
    // τ = 200 ms, I = 100 ms: tat is T0 + 300 after 3 grants, so the next conforms at T0 + 100.
    expect(first.wakeAt).toBe(T0 + 100);
    const at: number[] = first.grants.map(() => T0);
    for (let now = T0 + 7; now <= T0 + 3_000; now += 37) {
      for (let k = (await s.pump('payment', now)).grants.length; k > 0; k--) at.push(now);
    }
    expect(at).toHaveLength(20);
    for (let i = 0; i < at.length; i++) {
      for (let j = i; j < at.length; j++) {
        const windowMs = at[j]! - at[i]!;
        expect(j - i + 1, `grants ${i}..${j} within ${windowMs} ms`).toBeLessThanOrEqual(3 + Math.floor(windowMs / 100));
      }
    }
  });

  it('limits each key by its own rate and concurrency, taking the keys in turn', async () => {
    const s = await limited({ concurrency: 10, key: ['customerId'], perKeyConcurrency: 1 });
    const q = [item('a1', { key: 'A' }), item('a2', { key: 'A', firstAt: T0 + 1 }), item('a3', { key: 'A', firstAt: T0 + 2 }), item('b1', { key: 'B', firstAt: T0 + 3 })];
    const a = await s.apply('payment', { queue: q }, T0 + 5);
    expect(tickets(a.grants).sort()).toEqual(['a1', 'b1']);
    const st = await s.stats('payment', T0 + 5, 10);
    expect(st.keys).toEqual([
      { key: 'A', inFlight: 1, waiting: 2, oldestWaitMs: 4, blockedUntil: 'concurrency' },
      { key: 'B', inFlight: 1, waiting: 0 },
    ]);
    // A's permit ends: its next step goes, in its order.
    expect(tickets((await s.apply('payment', { release: [{ ticket: 'a1|s|run|1' }] }, T0 + 6)).grants)).toEqual(['a2']);
  });
});

describe('fair order', () => {
  it('serves the lowest level first; a step moves up one level per 30 s waited', async () => {
    const s = await limited({ concurrency: 1 });
    // Long budgets: no permit lapses while the test's clock moves minutes on.
    await s.apply('payment', { queue: [item('hold', { budgetMs: 600_000 })] }, T0);
    // Waiting behind `hold`: old5 at priority 5 since T0, then others later.
    await s.apply('payment', { queue: [item('old5', { priority: 5, firstAt: T0, budgetMs: 600_000 })] }, T0);
    const now = T0 + 2 * PRIORITY_AGING_MS + 10; // old5 is at level 3 now
    await s.apply('payment', { queue: [item('new1', { priority: 1, firstAt: now, budgetMs: 600_000 }), item('new3', { priority: 3, firstAt: now, budgetMs: 600_000 }), item('new4', { priority: 4, firstAt: now, budgetMs: 600_000 })] }, now);
    const order: string[] = [];
    let held = 'hold|s|run|1';
    for (let i = 0; i < 4; i++) {
      const g = await s.apply('payment', { release: [{ ticket: held }] }, now + i);
      order.push(...tickets(g.grants));
      held = g.grants[0]!.ticket;
    }
    // new1 (level 1); then old5 (level 3, older than new3 within the same key); then new3; then new4.
    expect(order).toEqual(['new1', 'old5', 'new3', 'new4']);
  });

  it('after (p − 1) × 30 s a priority-5 step competes as priority 1 and, older, goes before a new priority-1 step of its key', async () => {
    const s = await limited({ concurrency: 1 });
    await s.apply('payment', { queue: [item('hold', { budgetMs: 600_000 }), item('old5', { priority: 5 })] }, T0);
    const now = T0 + 4 * PRIORITY_AGING_MS;
    await s.apply('payment', { queue: [item('new1', { priority: 1, firstAt: now })] }, now);
    expect((await s.place('payment', 'old5|s|run|1'))).toMatchObject({ found: true, level: 1, place: 1 });
    expect(tickets((await s.apply('payment', { release: [{ ticket: 'hold|s|run|1' }] }, now)).grants)).toEqual(['old5']);
  });

  it('takes the keys in turn within a level, first come first served within a key', async () => {
    const s = await limited({ concurrency: 1, key: ['customerId'] });
    await s.apply('payment', { queue: [item('hold', { key: 'Z' })] }, T0);
    const q = [
      ...['a1', 'a2', 'a3', 'a4'].map((t, i) => item(t, { key: 'A', firstAt: T0 + 1 + i })),
      ...['b1', 'b2'].map((t, i) => item(t, { key: 'B', firstAt: T0 + 10 + i })),
      item('c1', { key: 'C', firstAt: T0 + 20 }),
    ];
    await s.apply('payment', { queue: q }, T0 + 30);
    // Place: a1 first; b1 after one A; c1 after one A and one B.
    expect(await s.place('payment', 'a1|s|run|1')).toMatchObject({ place: 1, approximate: false });
    expect(await s.place('payment', 'b1|s|run|1')).toMatchObject({ place: 2 });
    expect(await s.place('payment', 'c1|s|run|1')).toMatchObject({ place: 3 });
    expect(await s.place('payment', 'a3|s|run|1')).toMatchObject({ place: 6 });
    const order: string[] = [];
    let held = 'hold|s|run|1';
    for (let i = 0; i < 7; i++) {
      const g = await s.apply('payment', { release: [{ ticket: held }] }, T0 + 40 + i);
      order.push(...tickets(g.grants));
      held = g.grants[0]!.ticket;
    }
    expect(order).toEqual(['a1', 'b1', 'c1', 'a2', 'b2', 'a3', 'a4']);
    expect(await s.place('payment', 'a4|s|run|1')).toMatchObject({ found: true, granted: true });
    expect(await s.place('payment', 'nope|s|run|1')).toEqual({ found: false });
  });
});

describe('queueing, dequeueing, releasing', () => {
  it('is idempotent: a waiting ticket stays where it is; a live grant is returned again; an expired one goes back to its place', async () => {
    const s = await limited({ concurrency: 1 });
    expect(tickets((await s.apply('payment', { queue: [item('t1'), item('t2'), item('t3', { firstAt: T0 + 1 })] }, T0)).grants)).toEqual(['t1']);
    // t2 queued again (a redelivered transition): still one, still before t3.
    const again = await s.apply('payment', { queue: [item('t2'), item('t1')] }, T0 + 5);
    // t1's live grant comes back; nothing new is granted.
    expect(again.grants).toEqual([expect.objectContaining({ ticket: 't1|s|run|1', completeBy: T0 + 1_000 })]);
    expect(again.waiting).toBe(2);
    // t1 expires unstarted; queued again it goes back to its place — first — and is granted again.
    const back = await s.apply('payment', { queue: [item('t1')] }, T0 + 3_000);
    expect(tickets(back.grants)).toEqual(['t1']);
    expect(back.grants[0]!.completeBy).toBe(T0 + 4_000);
  });

  it('dequeues waiting and granted tickets; a release with requeue puts a late start back first of its key', async () => {
    const s = await limited({ concurrency: 1 });
    await s.apply('payment', { queue: [item('t1'), item('t2', { firstAt: T0 + 1 }), item('t3', { firstAt: T0 + 2 })] }, T0);
    // t2 dequeued while waiting, t1 (granted) dequeued: t3 is granted.
    const d = await s.apply('payment', { dequeue: ['t2|s|run|1', 't1|s|run|1'] }, T0 + 10);
    expect(tickets(d.grants)).toEqual(['t3']);
    await s.apply('payment', { queue: [item('t4', { firstAt: T0 + 20 })] }, T0 + 20);
    // t3's start came too late: released with requeue, it goes back before t4 — and, capacity free, is granted again.
    const late = await s.apply('payment', { release: [{ ticket: 't3|s|run|1', requeue: true }] }, T0 + 30);
    expect(tickets(late.grants)).toEqual(['t3']);
    expect(await s.stats('payment', T0 + 30)).toMatchObject({ waiting: 1, inFlight: 1 });
  });

  it('refuses a key the line cannot hold, and a priority outside 1–5, before calling Redis', async () => {
    const s = await limited({ concurrency: 1 });
    await expect(s.apply('payment', { queue: [item('t1', { key: 'a\u0000b' })] }, T0)).rejects.toThrow(/control character/);
    await expect(s.apply('payment', { queue: [item('t1', { key: 'x'.repeat(129) })] }, T0)).rejects.toThrow(/longer than 128 bytes/);
    await expect(s.apply('payment', { queue: [item('t1', { priority: 0 })] }, T0)).rejects.toThrow(/priority 0/);
  });
});

describe('pauses', () => {
  it('a pause of the agent type stops every grant until it ends, and only ever extends', async () => {
    const s = await limited({ concurrency: 5 });
    const p = await s.apply('payment', { pause: [{ until: T0 + 2_000 }], queue: [item('t1'), item('t2')] }, T0);
    expect(p.grants).toEqual([]);
    expect(p.wakeAt).toBe(T0 + 2_000);
    // `triad status` says "paused until …, then place n" (limitPlace with now; without it, no pause).
    expect(await s.place('payment', 't2|s|run|1', T0 + 1)).toMatchObject({ place: 2, pausedUntil: T0 + 2_000 });
    expect(await s.place('payment', 't2|s|run|1')).not.toHaveProperty('pausedUntil');
    await s.apply('payment', { pause: [{ until: T0 + 1_000 }] }, T0 + 1);
    expect((await s.pump('payment', T0 + 1_999)).grants).toEqual([]);
    expect(tickets((await s.pump('payment', T0 + 2_000)).grants)).toEqual(['t1', 't2']);
    expect((await s.stats('payment', T0 + 2_000)).throttled).toBe(2);
  });

  it('a pause of one key holds only that key; another key goes on', async () => {
    const s = await limited({ concurrency: 5, key: ['customerId'], pausePerKey: true });
    const p = await s.apply('payment', { pause: [{ key: 'A', until: T0 + 500 }], queue: [item('a1', { key: 'A' }), item('b1', { key: 'B' })] }, T0);
    expect(tickets(p.grants)).toEqual(['b1']);
    expect(p.wakeAt).toBe(T0 + 500);
    expect(await s.place('payment', 'a1|s|run|1', T0 + 1)).toMatchObject({ place: 1, key: 'A', pausedUntil: T0 + 500 });
    expect(tickets((await s.pump('payment', T0 + 500)).grants)).toEqual(['a1']);
  });

  it('a pause-only limiter (no limit) holds its steps for the pause, then lets them all go', async () => {
    const s = await limited(undefined);
    const p = await s.apply('payment', { pause: [{ until: T0 + 100 }], queue: [item('t1'), item('t2')] }, T0);
    expect(p).toMatchObject({ grants: [], limited: false, wakeAt: T0 + 100 });
    expect(tickets((await s.pump('payment', T0 + 100)).grants)).toEqual(['t1', 't2']);
  });
});

describe('bounded work per call', () => {
  it('grants at most 64 per call and then says wakeAt = now', async () => {
    const s = await limited(undefined);
    const q = Array.from({ length: 100 }, (_, i) => item(`t${i}`, { firstAt: T0 + i }));
    const a = await s.apply('payment', { queue: q }, T0 + 100);
    expect(a.grants).toHaveLength(64);
    expect(a.wakeAt).toBe(T0 + 100);
    const b = await s.pump('payment', T0 + 100);
    expect(b.grants).toHaveLength(36);
    expect(b.wakeAt).toBeUndefined();
    expect(tickets([...a.grants, ...b.grants])).toEqual(q.map((x) => x.taskId));
  });

  it('a raised limit lets waiting steps go at once; the supervisor\'s noGrant dequeue grants nothing', async () => {
    const s = await limited({ concurrency: 1 });
    await s.apply('payment', { queue: [item('t1'), item('t2', { firstAt: T0 + 1 }), item('t3', { firstAt: T0 + 2 })] }, T0);
    const d = await s.apply('payment', { dequeue: ['t1|s|run|1'], noGrant: true }, T0 + 1);
    expect(d).toMatchObject({ grants: [], waiting: 2, wakeAt: T0 + 1 });
    expect(tickets((await s.configure('payment', { concurrency: 5 }, T0 + 2)).grants)).toEqual(['t2', 't3']);
  });
});

describe('no leak, and retiring', () => {
  it('leaves nothing of a key once its work is done, and retires only an empty limiter', async () => {
    const s = await limited({ concurrency: 2, key: ['customerId'], perKeyRatePerSecond: 1 });
    await s.apply('payment', { queue: [item('a1', { key: 'A' }), item('a2', { key: 'A' })] }, T0);
    expect(await s.retire('payment', T0)).toEqual({ retired: false, reason: 'a limit is set' });
    await s.configure('payment', undefined, T0 + 1);
    expect(await s.retire('payment', T0 + 2)).toMatchObject({ retired: false, reason: expect.stringMatching(/permit\(s\) live|wait/) });
    await s.apply('payment', { release: [{ ticket: 'a1|s|run|1' }, { ticket: 'a2|s|run|1' }] }, T0 + 3);
    // The per-key rate state lapses; after it the key leaves no field behind.
    await s.pump('payment', T0 + 10_000);
    const limiter = s.keys.limiter('payment').all;
    expect(await r().hgetall(limiter[11]!)).toEqual({});
    expect(await s.retire('payment', T0 + 10_000)).toEqual({ retired: true });
    for (const key of limiter) expect(await r().exists(key), key).toBe(0);
  });
});

describe('the registry and the LimitCache', () => {
  it('builds the limited table from the registry, applies changes within its refresh interval, and leaves draining entries out', async () => {
    const s = new LimitStore(r(), ns());
    const cache = new LimitCache(s, { refreshMs: 1_000 });
    expect(await cache.limitedTable(T0)).toBe('');
    await s.set('payment', { concurrency: 3, key: ['customerId'], perKeyConcurrency: 1 }, T0);
    await s.set('inventory', { ratePerSecond: 5 }, T0);
    // Read within the interval: still the old table.
    expect(await cache.limitedTable(T0 + 999)).toBe('');
    expect(await cache.limitedTable(T0 + 1_000)).toBe('{"inventory":{},"payment":{"k":["customerId"]}}');
    expect((await s.stats('payment', T0)).limited).toBe(true);
    const { cleared } = await s.clear('inventory', T0 + 1_001);
    expect(cleared).toBe(true);
    expect(await cache.limitedTable(T0 + 2_000)).toBe('{"payment":{"k":["customerId"]}}');
    // A pause-only entry is in the table until its end; it is not registered over a limit.
    expect(await s.registerPause('fraud', T0 + 5_000)).toBe(true);
    expect(await s.registerPause('fraud', T0 + 4_000)).toBe(false);
    expect(await s.registerPause('payment', T0 + 5_000)).toBe(false);
    expect(await cache.limitedTable(T0 + 3_000)).toBe('{"fraud":{},"payment":{"k":["customerId"]}}');
    expect(cache.tableAt(T0 + 5_000)).toBe('{"payment":{"k":["customerId"]}}');
    // A pause this process applied is in its table at once.
    cache.notePause('shipping', T0 + 3_500);
    expect(cache.tableAt(T0 + 3_001)).toBe('{"fraud":{},"payment":{"k":["customerId"]},"shipping":{}}');
    // Compare-and-delete: only the entry that was retired is removed.
    const entries = await s.entries();
    expect(await s.unregister('fraud', '{"pausedUntil":1}')).toBe(false);
    expect(await s.unregister('fraud', entries.get('fraud')!.raw)).toBe(true);
    expect([...(await s.entries()).keys()].sort()).toEqual(['inventory', 'payment']);
    expect((await s.entries()).get('inventory')?.entry).toEqual({ draining: true });
  });

  it('skips a registry entry that does not parse, and says so', async () => {
    const s = new LimitStore(r(), ns());
    await r().hset(s.keys.limits.agents, 'payment', '{"concurrency":0,"setAt":1}', 'other', 'not json');
    const problems: string[] = [];
    expect((await s.entries((agent) => problems.push(agent))).size).toBe(0);
    expect(problems.sort()).toEqual(['other', 'payment']);
  });
});
