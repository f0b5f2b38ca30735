/** Opens a Redis connection configured for Triad's actors. */
import { Redis, type RedisOptions } from 'ioredis';

export function connectRedis(url: string, options: RedisOptions = {}, onError?: (e: Error) => void): Redis {
  const redis = new Redis(url, {
    // Commands wait through a short outage (a Redis restart) instead of failing at once; the callers'
    // NATS messages stay unacknowledged meanwhile and are redelivered if the process gives up.
    maxRetriesPerRequest: null,
    enableAutoPipelining: true,
    retryStrategy: (times) => Math.min(50 * times, 1000),
    connectionName: 'triad',
    ...options,
  });
  // Connection errors are retried by the client; without a listener ioredis prints each one as unhandled.
  redis.on('error', onError ?? (() => undefined));
  return redis;
}
