/** Test reads across the buckets of a namespace (decision 0015): an index is one zset per bucket. */
import type { Redis } from 'ioredis';
import type { BucketKeys, TaskStore } from '../src/index.js';

type Index = 'tasks' | 'deadlines' | 'finished' | 'compact' | 'alertOutbox';

/** Every member of an index over all buckets, with its score. */
export async function indexMap(redis: Redis, store: TaskStore, which: Index): Promise<Map<string, number>> {
  const out = new Map<string, number>();
  for (const b of store.keys.buckets) {
    const flat = await redis.zrange(b[which], 0, -1, 'WITHSCORES');
    for (let i = 0; i + 1 < flat.length; i += 2) out.set(flat[i] as string, Number(flat[i + 1]));
  }
  return out;
}

/** Members of an index over all buckets, by score then member. */
export async function indexMembers(redis: Redis, store: TaskStore, which: Index): Promise<string[]> {
  return [...(await indexMap(redis, store, which))].sort((a, b) => a[1] - b[1] || (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0)).map(([m]) => m);
}

/** The bucket of a task: where its index entries are. */
export function bucketFor(store: TaskStore, taskId: string): BucketKeys {
  return store.keys.forTask(taskId);
}
