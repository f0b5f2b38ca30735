/** The key layout (decision 0015): what one transition touches is in one Redis Cluster slot, under triad:<ns>:. */
import { describe, expect, it } from 'vitest';
import calculateSlot from 'cluster-key-slot';
import { BUCKETS, bucketOf, keys } from '../src/index.js';

describe('key layout', () => {
  const k = keys('shop');
  const ids = Array.from({ length: 2_000 }, (_, i) => `order-${i}`);

  it('keeps every key under triad:<ns>: (the ACL pattern of decision 0011)', () => {
    const all = [
      ...ids.slice(0, 50).flatMap((id) => [k.task(id), k.lease(id, 'task')]),
      ...k.buckets.flatMap((b) => [b.tasks, b.deadlines, b.finished, b.compact, b.alerts, b.alertOutbox, b.epoch, `${b.taskPrefix}x`]),
      k.workflow('w'),
      k.workflows,
      k.supervisorLeader,
      k.supervisorEpoch,
      k.supervisorStatus,
    ];
    for (const key of all) expect(key.startsWith('triad:shop:')).toBe(true);
  });

  it('puts a task, its lease and its bucket\'s indexes and fence in one slot', () => {
    for (const id of ids.slice(0, 200)) {
      const b = k.forTask(id);
      const slot = calculateSlot(k.task(id));
      for (const key of [k.lease(id, 'task'), b.tasks, b.deadlines, b.finished, b.compact, b.alerts, b.alertOutbox, b.epoch]) expect(calculateSlot(key)).toBe(slot);
    }
    expect(calculateSlot(k.workflow('a'))).toBe(calculateSlot(k.workflows));
    expect(calculateSlot(k.workflow('b'))).toBe(calculateSlot(k.workflows));
    expect(calculateSlot(k.supervisorLeader)).toBe(calculateSlot(k.supervisorEpoch));
  });

  it('puts the limit registry in one slot and each agent type\'s limiter in a slot of its own (decision 0020)', () => {
    expect(calculateSlot(k.limits.agents)).toBe(calculateSlot(k.limits.version));
    const pay = k.limiter('payment');
    expect(pay.all).toHaveLength(17);
    for (const key of [...pay.all, k.limits.agents, k.limits.version]) expect(key.startsWith('triad:shop:')).toBe(true);
    expect(new Set(pay.all.map((key) => calculateSlot(key))).size).toBe(1);
    expect(pay.all[0]).toBe('triad:shop:{shop:lim:payment}:cfg');
    expect(calculateSlot(k.limiter('inventory').all[0]!)).not.toBe(calculateSlot(pay.all[0]!));
    expect(() => k.limiter('no spaces')).toThrow();
  });

  it('spreads tasks over every bucket, and the buckets over many slots', () => {
    const counts = new Array<number>(BUCKETS).fill(0);
    for (const id of ids) counts[bucketOf(id)] = (counts[bucketOf(id)] ?? 0) + 1;
    // 2000 ids over 64 buckets: about 31 each; a hash that clumps would leave buckets near empty.
    expect(Math.min(...counts)).toBeGreaterThan(10);
    expect(Math.max(...counts)).toBeLessThan(60);
    expect(new Set(k.buckets.map((b) => calculateSlot(b.tasks))).size).toBe(BUCKETS);
    // A cluster of 3 primaries splits the slots in 3 ranges: each gets a fair share of the buckets.
    const perThird = [0, 0, 0];
    for (const b of k.buckets) perThird[Math.floor(calculateSlot(b.tasks) / 5462)]! += 1;
    expect(Math.min(...perThird)).toBeGreaterThanOrEqual(14);
  });

  it('computes the same bucket every time (FNV-1a of the id)', () => {
    // Fixed values: a change here moves every stored task, which needs a migration, not a code change.
    // Expected values computed independently (Python: FNV-1a 32 bit, then % 64).
    expect([bucketOf(''), bucketOf('a'), bucketOf('order-1'), bucketOf('f0000000-0000-4000-8000-000000000000')]).toEqual([0x811c9dc5 % 64, 0xe40c292c % 64, 45, 3]);
  });
});
