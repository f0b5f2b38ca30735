/** Opens a Redis connection configured for Triad's actors. */
import { Redis, type RedisOptions } from 'ioredis';

export function connectRedis(url: string, options: RedisOptions = {}, onError?: (e: Error) => void): Redis {
  const redis = new Redis(url, {
    // Commands wait through a short outage (a Redis restart) instead of failing at once; the callers'
    // NATS messages stay unacknowledged meanwhile and are redelivered if the process gives up.
    maxRetriesPerRequest: null,
    // Off: ioredis' auto-pipelining defers every command to a setImmediate to gather a batch, which
    // cost each Lua transition about 55 µs at low load and gained no throughput in the benchmark
    // (docs/performance.md, round 3); a step makes two transitions on its critical path.
    enableAutoPipelining: false,
    retryStrategy: (times) => Math.min(50 * times, 1000),
    connectionName: 'triad',
    ...options,
  });
  // Connection errors are retried by the client; without a listener ioredis prints each one as unhandled.
  redis.on('error', onError ?? (() => undefined));
  return redis;
}
