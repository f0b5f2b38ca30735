/**
 * A private redis-server for one store test file: started on a free port before the file's tests,
 * stopped after them, through @triad/launcher (the binary found or its install hint given, the child
 * never outliving the test worker). The store package cannot use the repository's test harness: that
 * workspace depends on this one.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startRedisServer, type LaunchedServer } from '@triad/launcher';
import { afterAll, beforeAll } from 'vitest';
import type { Redis } from 'ioredis';
import { connectRedis } from '../src/index.js';

const BY = { by: "by the store package's tests" };

/**
 * Registers the file's beforeAll/afterAll and returns the accessor of the connection; `onStart` runs
 * once the server answers (e.g. to seed keys every test relies on).
 */
export function usePrivateRedis(connectionName: string, onStart?: (redis: Redis) => Promise<unknown>): () => Redis {
  let server: LaunchedServer | undefined;
  let redis: Redis | undefined;
  let dir: string | undefined;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'triad-store-test-'));
    server = await startRedisServer({ dir, purpose: BY });
    redis = await connectRedis(server.url, { connectionName });
    if (onStart) await onStart(redis);
  });

  afterAll(async () => {
    if (redis) await redis.quit().catch(() => redis?.disconnect());
    await server?.process.kill();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  return () => {
    if (!redis) throw new Error('the private redis-server is not running (its beforeAll failed; see the first error)');
    return redis;
  };
}
