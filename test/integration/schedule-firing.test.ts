// The leader's schedule firing (decision 0019 §6.3) with a clock of its own, on a real redis-server: the
// ticks of a failover's gap all fire, ten at a time, oldest first, until caught up; after an outage only
// the latest fires and the rest count as missed; overlap skip reads the last task's status (running:
// skipped; finished: fired; not a task yet but in the outbox: skipped); a deposed leader's fire is refused.
// `fireDue` publishes nothing (the outbox is published separately), so no NATS is needed here.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Bus } from '@triad/bus';
import { encode, isTriadError } from '@triad/protocol';
import { ScheduleStore, connectRedis, keys, type RedisClient } from '@triad/store';
import { ScheduleFiring, supervisorMetrics } from '@triad/supervisor';
import { silentLogger } from '@triad/telemetry';

import { startRedis, uniqueNamespace, withTeardown } from '../harness/index.js';

const td = withTeardown(afterAll);
let redis: RedisClient;

beforeAll(async () => {
  const server = await startRedis({ teardown: td });
  redis = await connectRedis(server.url, { connectionName: 'schedule-firing-test' });
  td.add(async () => {
    await redis.quit();
  });
});

const T0 = 1_700_000_000_000;
const CATCH_UP = 60_000;
const INTERVAL = 1_000;

function setup(): { ns: string; store: ScheduleStore; firing: ScheduleFiring } {
  const ns = uniqueNamespace('schfire');
  const store = new ScheduleStore(redis, ns);
  // The bus is only used to publish the outbox, which these tests never do.
  const firing = new ScheduleFiring(store, {} as Bus, silentLogger, supervisorMetrics(ns));
  return { ns, store, firing };
}

const every = (name: string, ms: number, overlap: 'skip' | 'allow' = 'allow') => ({ name, workflow: 'wf', client: 'web', every: ms, overlap, input: encode({ n: 1 }) });
const ticksOf = async (store: ScheduleStore) => (await store.outbox(10_000)).map((p) => Number(p.taskId.split(':')[2])).sort((a, b) => a - b);
const leading = () => true;

describe('schedule firing', () => {
  it("a failover's gap fires every tick, ten at a time, oldest first, until caught up", async () => {
    const { store, firing } = setup();
    await store.put(every('gap', 1_000), T0 + 1_000, T0, false);
    const now = T0 + 25_500;
    const passes: { behind: boolean; fired: number }[] = [];
    for (let i = 0; i < 4; i++) passes.push(await firing.fireDue(now, 1, CATCH_UP, INTERVAL, leading));
    expect(passes).toEqual([
      { behind: true, fired: 10 },
      { behind: true, fired: 10 },
      { behind: false, fired: 5 },
      { behind: false, fired: 0 },
    ]);
    expect(await ticksOf(store)).toEqual(Array.from({ length: 25 }, (_, k) => T0 + (k + 1) * 1_000));
    expect(await store.get('gap')).toMatchObject({ fired: 25, missed: 0, lastTick: T0 + 25_000, nextTick: T0 + 26_000 });
  });

  it('after an outage only the latest tick fires; the others count as missed', async () => {
    const { store, firing } = setup();
    await store.put(every('outage', 1_000), T0 + 1_000, T0, false);
    expect(await firing.fireDue(T0 + 1_000, 1, CATCH_UP, INTERVAL, leading)).toEqual({ behind: false, fired: 1 });
    // Down for 200 s: ticks 2 … 200 are due, the oldest older than the catch-up window.
    expect(await firing.fireDue(T0 + 200_000, 1, CATCH_UP, INTERVAL, leading)).toEqual({ behind: false, fired: 1 });
    expect(await ticksOf(store)).toEqual([T0 + 1_000, T0 + 200_000]);
    expect(await store.get('outage')).toMatchObject({ fired: 2, missed: 198, lastTick: T0 + 200_000, nextTick: T0 + 201_000 });
  });

  it("overlap skip: skipped while the last task runs or is on its way; fired once it finished", async () => {
    const { ns, store, firing } = setup();
    await store.put(every('skip', 1_000, 'skip'), T0 + 1_000, T0, false);
    await firing.fireDue(T0 + 1_000, 1, CATCH_UP, INTERVAL, leading);
    const first = `sch:skip:${T0 + 1_000}`;
    // Not a task yet, still in the outbox: running.
    await firing.fireDue(T0 + 2_000, 1, CATCH_UP, INTERVAL, leading);
    expect(await store.get('skip')).toMatchObject({ fired: 1, skipped: 1, lastTaskId: first });
    // Published (out of the outbox) and recorded by a scheduler as running: still skipped.
    await store.published((await store.outbox(100)).map((p) => p.field));
    await redis.hset(keys(ns).task(first), 'id', first, 'status', 'running');
    await firing.fireDue(T0 + 3_000, 1, CATCH_UP, INTERVAL, leading);
    expect(await store.get('skip')).toMatchObject({ fired: 1, skipped: 2 });
    // Finished: the next tick fires.
    await redis.hset(keys(ns).task(first), 'status', 'completed');
    await firing.fireDue(T0 + 4_000, 1, CATCH_UP, INTERVAL, leading);
    expect(await store.get('skip')).toMatchObject({ fired: 2, skipped: 2, lastTaskId: `sch:skip:${T0 + 4_000}` });
  });

  it("a deposed leader's fire is refused STALE and writes nothing", async () => {
    const { store, firing } = setup();
    await store.put(every('fenced', 1_000), T0 + 1_000, T0, false);
    await firing.fireDue(T0 + 1_000, 7, CATCH_UP, INTERVAL, leading);
    const e = await firing.fireDue(T0 + 2_000, 6, CATCH_UP, INTERVAL, leading).then(() => undefined, (x: unknown) => x);
    expect(isTriadError(e, 'STALE')).toBe(true);
    expect(await store.get('fenced')).toMatchObject({ fired: 1, lastTick: T0 + 1_000 });
  });
});
