/**
 * BullMQ flows on the run's private Redis: the producer and the completion listener (QueueEvents, as
 * `job.waitUntilFinished` uses) in the bench process, the workers in a process of their own — as a
 * BullMQ deployment runs them.
 */
import { join } from 'node:path';
import { FlowProducer, QueueEvents } from 'bullmq';
import { Redis } from 'ioredis';
import { startProcess } from '@triad/launcher';
import { REPO_ROOT } from '../actors.js';
import type { ProcessRef } from '../cpu.js';
import { TASKS_QUEUE, taskFlow } from './bullmq-flow.js';
import { packageVersion, type PeerRunOptions, type PeerSystem } from './peer.js';

const READY_TIMEOUT_MS = 30_000;

export async function startBullmq(o: PeerRunOptions, redisPid: number | undefined): Promise<PeerSystem> {
  const prefix = `bull-${o.namespace}`;
  const worker = await startProcess({
    name: 'bullmq-worker',
    args: [join(REPO_ROOT, 'apps/bench/dist/peers/bullmq-worker.js')],
    env: { BULL_REDIS_URL: o.redisUrl, BULL_PREFIX: prefix, BULL_CONCURRENCY: String(o.concurrency) },
  });
  const producerConn = new Redis(o.redisUrl, { maxRetriesPerRequest: null });
  const eventsConn = new Redis(o.redisUrl, { maxRetriesPerRequest: null });
  const producer = new FlowProducer({ connection: producerConn, prefix });
  const events = new QueueEvents(TASKS_QUEUE, { connection: eventsConn, prefix });
  const waiters = new Map<string, { resolve: () => void; reject: (e: Error) => void }>();
  events.on('completed', ({ jobId }) => waiters.get(jobId)?.resolve());
  events.on('failed', ({ jobId, failedReason }) => waiters.get(jobId)?.reject(new Error(`BullMQ task ${jobId} failed: ${failedReason}`)));
  const stop = async (): Promise<void> => {
    await Promise.allSettled([events.close(), producer.close()]);
    producerConn.disconnect();
    eventsConn.disconnect();
    await worker.stop(5_000);
  };
  try {
    await Promise.all([worker.waitForOutput(/bullmq-worker ready/, READY_TIMEOUT_MS), events.waitUntilReady()]);
  } catch (e) {
    await stop();
    throw e;
  }
  const processes: ProcessRef[] = [{ name: 'bullmq worker', pid: worker.pid }];
  if (redisPid !== undefined) processes.push({ name: 'redis-server', pid: redisPid });
  return {
    label: `BullMQ ${packageVersion('bullmq')} flows (a parent with sequential children, concurrency ${o.concurrency})`,
    processes,
    runTask: (id, steps) =>
      new Promise<void>((resolve, reject) => {
        const done = (): void => void waiters.delete(id);
        waiters.set(id, {
          resolve: () => {
            done();
            resolve();
          },
          reject: (e) => {
            done();
            reject(e);
          },
        });
        producer.add(taskFlow(id, steps)).catch((e: unknown) => {
          done();
          reject(e instanceof Error ? e : new Error(String(e)));
        });
      }),
    stop,
  };
}
