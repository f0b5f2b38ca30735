// Scale-out (decision 0015): the example on a 3-node NATS cluster (streams with 3 replicas) and a Redis
// Cluster of 3 primaries with a replica each, with two schedulers and two agent processes; mid-run one
// NATS node is killed, then one Redis primary (its replica is promoted). Every task ends; no effect is
// applied twice. Kept lean (few tasks, generous timeouts): the machine is shared.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ordersWorkflow } from '@triad/example-orders';
import type { TaskState } from '@triad/protocol';
import { keys } from '@triad/store';
import { startNatsCluster, startRedisCluster, withTeardown, type NatsCluster, type RedisCluster } from '../harness/index.js';
import { checkLedgers } from '../support/ledger.js';
import { effectCounts, startTriad, type TestTriad } from '../support/triad.js';

const td = withTeardown(afterAll);
let nats: NatsCluster;
let redis: RedisCluster;
let triad: TestTriad;

const STEP_OF = { inventory: 'reserve', fraud: 'fraud', payment: 'charge', shipping: 'ship' } as const;

beforeAll(async () => {
  [nats, redis] = await Promise.all([startNatsCluster({ teardown: td }), startRedisCluster({ teardown: td })]);
  triad = await startTriad(
    td,
    { nats: { url: nats.urls }, redis: { url: redis.nodes[0]!.url } },
    {
      schedulers: 2,
      agentProcesses: 2,
      env: { TRIAD_REDIS_CLUSTER: redis.seeds, TRIAD_STREAM_REPLICAS: '3', TRIAD_REDIS_WAIT_REPLICAS: '1', TRIAD_REDIS_WAIT_MS: '2000' },
    },
  );
}, 180_000);

async function submit(prefix: string, n: number): Promise<string[]> {
  return Promise.all(Array.from({ length: n }, (_, i) => triad.client.submit('orders', { orderId: `${prefix}-${i}`, amount: i + 1 }).then((r) => r.taskId)));
}

/** Every task's final state; on a timeout, fails with the stuck tasks' states and the actors' last output. */
async function waitAll(ids: readonly string[], timeoutMs: number): Promise<TaskState[]> {
  const settled = await Promise.allSettled(ids.map((id) => triad.client.wait(id, { timeoutMs })));
  const stuck = ids.filter((_, i) => settled[i]?.status === 'rejected');
  if (stuck.length === 0) return settled.map((r) => (r as PromiseFulfilledResult<TaskState>).value);
  const states = await Promise.all(stuck.map((id) => triad.client.getTask(id).catch((e: unknown) => String(e))));
  const show = (t: TaskState | string): string =>
    typeof t === 'string' ? t : `${t.taskId} ${t.status} lockedBy=${t.lockedBy ?? ''} ${t.steps.map((s) => `${s.name}:${s.status}#${s.attempt}`).join(' ')}`;
  const tails = [...triad.schedulers, ...triad.supervisors, ...triad.agents].map((p) => `--- ${p.name}\n${p.output().slice(-1500)}`);
  throw new Error(`${stuck.length} of ${ids.length} tasks did not end within ${timeoutMs} ms:\n${states.map(show).join('\n')}\n${tails.join('\n')}`);
}

describe('on a NATS cluster and a Redis Cluster', () => {
  it('the clusters are wired: 3 routed NATS nodes, streams with 3 replicas, 3 Redis primaries with a replica each, tasks spread over them', async () => {
    const info = await triad.client.bus.jsm.streams.info(triad.client.bus.names.streams.steps);
    expect(info.config.num_replicas).toBe(3);
    expect(info.cluster?.replicas ?? []).toHaveLength(2);
    const primaries = await redis.primaries();
    expect(primaries).toHaveLength(3);
    const ids = await submit('wired', 6);
    const states = await Promise.all(ids.map((id) => triad.client.wait(id, { timeoutMs: 60_000 })));
    expect(states.map((s) => s.status)).toEqual(ids.map(() => 'completed'));
    // The task hashes live on more than one primary (buckets spread over the slots).
    const owners = new Set<number>();
    for (const id of ids) owners.add((await redis.primaryFor(keys(triad.namespace).task(id))).port);
    expect(owners.size).toBeGreaterThan(1);
  }, 120_000);

  it('through the loss of a NATS node and then of a Redis primary: every task ends, no effect applied twice', async () => {
    const before = await submit('before', 8);
    // Kill a NATS node while those run (clients and actors connected to it reconnect to the others;
    // streams whose leader it was elect another).
    await nats.nodes[1]!.kill();
    const duringNats = await submit('nats-down', 8);
    // Then a Redis primary: the one serving the first task's bucket. Its replica is promoted after the
    // node timeout; commands meanwhile wait and follow the new slot owner.
    const victim = await redis.primaryFor(keys(triad.namespace).task(before[0]!));
    await victim.kill();
    const duringRedis = await submit('redis-down', 8);
    await redis.waitForHealthy(60_000);
    const ids = [...before, ...duringNats, ...duringRedis];
    const states = await waitAll(ids, 150_000);
    // Every task ends; with a healthy cluster after the failover, the orders all complete.
    expect(states.filter((s) => s.status !== 'completed').map((s) => `${s.taskId}:${s.status}`)).toEqual([]);
    for (const service of Object.values(triad.services)) {
      const counts = effectCounts(service);
      const step = STEP_OF[service.name as keyof typeof STEP_OF];
      for (const id of ids) expect(counts.get(`${triad.namespace}/${id}/${step}`), `${service.name} effect of ${id}`).toBe(1);
    }
    expect(checkLedgers(triad.namespace, triad.services, ordersWorkflow.toJSON(), states)).toEqual({ orphans: [], wrongUndos: [], duplicates: [] });
  }, 300_000);
});
