/**
 * The BullMQ peer's worker process: no-op workers on the step queue and the parent queue, with the
 * concurrency Triad's agent host uses. Reads BULL_REDIS_URL, BULL_PREFIX and BULL_CONCURRENCY.
 */
import { Worker } from 'bullmq';
import { Redis } from 'ioredis';
import { z } from 'zod';
import { STEPS_QUEUE, TASKS_QUEUE } from './bullmq-flow.js';

const env = z
  .object({
    BULL_REDIS_URL: z.string().url('BULL_REDIS_URL must be a redis:// URL'),
    BULL_PREFIX: z.string().min(1, 'BULL_PREFIX is required'),
    BULL_CONCURRENCY: z.coerce.number().int().min(1, 'BULL_CONCURRENCY must be a whole number ≥ 1'),
  })
  .parse(process.env);

// BullMQ's workers block on Redis: they need a connection that never gives up on a request.
const connection = new Redis(env.BULL_REDIS_URL, { maxRetriesPerRequest: null });
const noop = (): Promise<null> => Promise.resolve(null);
const workers = [STEPS_QUEUE, TASKS_QUEUE].map((q) => new Worker(q, noop, { connection, prefix: env.BULL_PREFIX, concurrency: env.BULL_CONCURRENCY }));

async function main(): Promise<void> {
  await Promise.all(workers.map((w) => w.waitUntilReady()));
  process.stdout.write('bullmq-worker ready\n');
}

process.once('SIGTERM', () => {
  void Promise.all(workers.map((w) => w.close())).finally(() => {
    connection.disconnect();
    process.exit(0);
  });
});
main().catch((e: unknown) => {
  process.stderr.write(`bullmq-worker: ${String(e)}\n`);
  process.exit(1);
});
