// Proves the supervisors' leadership on real redis-servers: the lease is a Redlock lock (held with `using`,
// on the state store or by quorum over independent instances), the epoch is raised under it, every bucket
// is fenced at it, and a deposed leader stops acting and is refused.
import { describe, expect, it } from 'vitest';
import { ErrorCode } from '@triad/protocol';
import { compilePlan, validateDefinition } from '@triad/core';
import { Leadership, TaskStore, keys, type LeadershipState } from '../src/index.js';
import { usePrivateRedis } from './redis-server.js';

const r = usePrivateRedis('triad-leadership-test');
// Three more, independent: the instances Redlock takes the lease on by quorum (TRIAD_REDLOCK_URLS).
const lockServers = [usePrivateRedis('triad-redlock-1'), usePrivateRedis('triad-redlock-2'), usePrivateRedis('triad-redlock-3')];

let nsCounter = 0;
function ns(): string {
  nsCounter++;
  return `l${process.pid}-${nsCounter}`;
}

/** A candidate, with every state it reported. */
function candidate(namespace: string, id: string, leaseMs: number, more: { lockServers?: boolean } = {}) {
  const states: LeadershipState[] = [];
  const l = new Leadership({ redis: r(), namespace, id, leaseMs, onChange: (s) => states.push(s), ...(more.lockServers ? { lockServers: lockServers.map((s) => s()) } : {}) });
  return { l, states, last: () => states.at(-1) };
}

const POLL = { timeout: 15_000, interval: 20 };

describe('Leadership', () => {
  it('one of two candidates leads with epoch 1, the other follows naming it; when the leader stops the other leads with epoch 2', async () => {
    const namespace = ns();
    const a = candidate(namespace, 'sup-a', 2_000);
    const b = candidate(namespace, 'sup-b', 2_000);
    await a.l.start();
    expect(a.last()).toEqual({ leading: true, epoch: 1 });
    expect(a.l.isLeader()).toBe(true);
    expect(await r().get(keys(namespace).supervisorLeader)).toBe('sup-a|1');
    await b.l.start();
    expect(b.last()).toEqual({ leading: false, epoch: 0, holder: 'sup-a|1' });
    expect(b.l.isLeader()).toBe(false);
    // Every bucket is fenced at the leader's epoch before it acts.
    expect(new Set(await Promise.all(keys(namespace).buckets.map((x) => r().get(x.epoch))))).toEqual(new Set(['1']));

    // A graceful stop releases the lease and the record: B takes over without waiting for the lease to lapse.
    await a.l.stop();
    expect(a.l.isLeader()).toBe(false);
    await expect.poll(() => b.l.isLeader(), { ...POLL, message: 'B to lead after A stopped' }).toBe(true);
    expect(b.l.currentEpoch()).toBe(2);
    expect(await r().get(keys(namespace).supervisorLeader)).toBe('sup-b|2');
    await b.l.stop();
    expect(await r().exists(keys(namespace).supervisorLeader, keys(namespace).supervisorLock)).toBe(0);
  });

  it('Redlock extends the lease while it is held; a leader whose lease is taken from it learns it from the abort signal, stops acting, and its writes are refused', async () => {
    const namespace = ns();
    const k = keys(namespace);
    const a = candidate(namespace, 'sup-a', 600);
    await a.l.start();
    expect(a.last()).toEqual({ leading: true, epoch: 1 });
    // Held across several lease lengths: `using` extends it (a third of the lease before it ends).
    const heldSince = Date.now();
    await expect.poll(async () => Date.now() - heldSince > 2_000 && a.l.isLeader() && (await r().pttl(k.supervisorLock)) > 0, { ...POLL, message: 'the lease held past three lease lengths' }).toBe(true);
    expect(a.l.currentEpoch()).toBe(1);

    // The lock is lost (as after a partition or a failover): B takes it and is elected.
    const b = candidate(namespace, 'sup-b', 600);
    await r().del(k.supervisorLock);
    await b.l.start();
    await expect.poll(() => b.l.isLeader(), { ...POLL, message: 'B to lead once the lock was free' }).toBe(true);
    expect(b.l.currentEpoch()).toBe(2);
    // A's next extension fails: Redlock aborts its routine and A stops acting.
    await expect.poll(() => a.l.isLeader(), { ...POLL, message: 'A to learn it lost the lease' }).toBe(false);
    await expect.poll(() => a.last()?.leading, POLL).toBe(false);
    // Whatever A still believes, its epoch is refused in every bucket.
    const store = new TaskStore(r(), namespace);
    const plan = compilePlan(validateDefinition({ name: 'one', steps: [{ name: 'a', agent: 'x', budgetMs: 1_000 }] }));
    await store.createTask({ lease: { key: `test:${namespace}:lease`, token: 't', ms: 60_000 }, taskId: 'fence-1', workflow: 'one', version: 1, input: new Uint8Array([0xc0]), plan, onFailure: 'error', client: 'c', now: 1_000, schedulerId: 's' });
    await expect(store.expireStep('fence-1', 'a', 1_000_000, 1)).rejects.toMatchObject({ code: ErrorCode.Stale });
    await expect(store.fenceBuckets(1)).rejects.toMatchObject({ code: ErrorCode.Stale });
    await Promise.all([a.l.stop(), b.l.stop()]);
  });

  it('an epoch a bucket already saw (an election lost in a failover) is never led with: the candidate moves the counter past it and is elected again', async () => {
    const namespace = ns();
    const k = keys(namespace);
    // A failover lost the counter after bucket 7 saw epoch 4.
    await r().set(k.buckets[7]!.epoch, '4');
    const b = candidate(namespace, 'sup-b', 2_000);
    await b.l.start();
    await expect.poll(() => b.l.isLeader(), { ...POLL, message: 'B to lead with a fresh epoch' }).toBe(true);
    expect(b.l.currentEpoch()).toBe(5);
    // It never reported leading with epoch 1.
    expect(b.states.filter((s) => s.leading).map((s) => s.epoch)).toEqual([5]);
    expect(new Set(await Promise.all(k.buckets.map((x) => r().get(x.epoch))))).toEqual(new Set(['5']));
    await b.l.stop();
  });

  it('on independent instances (TRIAD_REDLOCK_URLS) the lease is held by quorum: losing it on one instance changes nothing, on two it passes to another candidate', async () => {
    const namespace = ns();
    const k = keys(namespace);
    const a = candidate(namespace, 'sup-a', 800, { lockServers: true });
    const b = candidate(namespace, 'sup-b', 800, { lockServers: true });
    await a.l.start();
    expect(a.last()).toEqual({ leading: true, epoch: 1 });
    // The lock is on every instance with one value; the state store holds only the epoch and the record.
    const values = await Promise.all(lockServers.map((s) => s().get(k.supervisorLock)));
    expect(new Set(values).size).toBe(1);
    expect(values[0]).toBeTruthy();
    expect(await r().exists(k.supervisorLock)).toBe(0);
    await b.l.start();
    expect(b.last()).toMatchObject({ leading: false, holder: 'sup-a|1' });

    // One instance loses the key: B can take it there but never a quorum; A keeps leading across extensions.
    await lockServers[0]!().del(k.supervisorLock);
    const since = Date.now();
    await expect.poll(() => Date.now() - since > 2_000, { ...POLL, message: 'two lease lengths to pass' }).toBe(true);
    expect(a.l.isLeader()).toBe(true);
    expect(b.l.isLeader()).toBe(false);

    // Two of three lose it: B gets the quorum, A's extension fails and it stops.
    await Promise.all([lockServers[1]!().del(k.supervisorLock), lockServers[2]!().del(k.supervisorLock)]);
    await expect.poll(() => b.l.isLeader(), { ...POLL, message: 'B to lead with a quorum of the instances' }).toBe(true);
    expect(b.l.currentEpoch()).toBe(2);
    await expect.poll(() => a.l.isLeader(), { ...POLL, message: 'A to stop leading' }).toBe(false);
    await Promise.all([a.l.stop(), b.l.stop()]);
  });
});
