/** The Redis client the store runs on: one Redis, or a Redis Cluster (decision 0015) — one code path for both. */
import type { Cluster, Redis } from 'ioredis';

export type RedisClient = Redis | Cluster;

/** Whether the client talks to a Redis Cluster (ioredis marks its Cluster client with `isCluster`). */
export function isCluster(redis: RedisClient): redis is Cluster {
  return (redis as { isCluster?: boolean }).isCluster === true;
}
