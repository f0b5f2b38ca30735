/** The Redis client the store runs on: one Redis, or a Redis Cluster (decision 0015) — one code path for both. */
import type { Cluster, Redis } from 'ioredis';

export type RedisClient = Redis | Cluster;
