/**
 * The floors under one step leg, measured in the same run on the same servers (issue #26 item 4): a
 * step leg is two stored JetStream hops (the request to the agent, the result back) and a Redis round
 * trip (the transition), plus what the processes do. A stored hop is publish → a pull consumer in
 * another connection has the message, one message at a time, through a work-queue stream with Triad's
 * settings (replicas as the run's streams); the Redis round trip is a small write (`SET`, as the
 * transition writes: with `appendfsync always` it includes the fsync).
 */
import { performance } from 'node:perf_hooks';
import { AckPolicy, DeliverPolicy, DiscardPolicy, RetentionPolicy, StorageType, jetstream, jetstreamManager } from '@nats-io/jetstream';
import { nanos } from '@nats-io/nats-core';
import type { Redis } from 'ioredis';
import type { NatsConnectionOptions } from '@triad/settings';
import { baselineConnection } from './pump.js';
import { percentile, withTimeout } from './timing.js';

export interface FloorsResult {
  samples: number;
  storedHopP50Ms: number;
  storedHopP99Ms: number;
  redisRoundTripP50Ms: number;
  redisRoundTripP99Ms: number;
  /** Two stored hops and a Redis round trip, at p50. */
  stepLegFloorP50Ms: number;
}

/** A step leg's floor from its parts' medians: two stored hops (request, result) and one Redis round trip. */
export function stepLegFloor(storedHopP50Ms: number, redisRoundTripP50Ms: number): number {
  return 2 * storedHopP50Ms + redisRoundTripP50Ms;
}

const HOP_TIMEOUT_MS = 10_000;

export async function measureFloors(o: { nats: NatsConnectionOptions; namespace: string; replicas: number; samples: number; warmup: number }, redis: Redis): Promise<FloorsResult> {
  const stream = `BENCH_${o.namespace}_FLOOR`;
  const subject = `bench.${o.namespace}.floor`;
  const pub = await baselineConnection(o.nats, o.namespace, 'bench-floor-pub');
  const sub = await baselineConnection(o.nats, o.namespace, 'bench-floor-sub');
  const jsm = await jetstreamManager(pub, { timeout: 10_000 });
  const hops: number[] = [];
  try {
    await jsm.streams.add({ name: stream, subjects: [subject], retention: RetentionPolicy.Workqueue, storage: StorageType.File, num_replicas: o.replicas, duplicate_window: nanos(120_000), discard: DiscardPolicy.Old });
    await jsm.consumers.add(stream, { durable_name: 'floor', ack_policy: AckPolicy.Explicit, deliver_policy: DeliverPolicy.All, filter_subject: subject, ack_wait: nanos(30_000) });
    const js = jetstream(pub, { timeout: 10_000 });
    const messages = await (await jetstream(sub).consumers.get(stream, 'floor')).consume({ max_messages: 64, expires: 2_000 });
    let arrived: () => void = () => undefined;
    const loop = (async () => {
      for await (const m of messages) {
        m.ack();
        arrived();
      }
    })();
    const payload = new Uint8Array(256);
    try {
      for (let i = 0; i < o.warmup + o.samples; i++) {
        const got = new Promise<void>((r) => (arrived = r));
        const t0 = performance.now();
        // As the scheduler publishes a step request: stored (PubAck awaited) — the hop ends on delivery.
        const acked = js.publish(subject, payload, { msgID: `floor:${i}` });
        await withTimeout(got, HOP_TIMEOUT_MS, `stored hop ${i}`);
        if (i >= o.warmup) hops.push(performance.now() - t0);
        await acked;
      }
    } finally {
      await messages.close();
      await loop.catch(() => undefined);
    }
  } finally {
    await jsm.streams.delete(stream).catch(() => false);
    await Promise.all([pub.drain(), sub.drain()]).catch(() => undefined);
  }
  const rtts: number[] = [];
  const key = `bench:${o.namespace}:floor`;
  for (let i = 0; i < o.warmup + o.samples; i++) {
    const t0 = performance.now();
    await redis.set(key, String(i));
    if (i >= o.warmup) rtts.push(performance.now() - t0);
  }
  await redis.del(key);
  const storedHopP50Ms = percentile(hops, 50);
  const redisRoundTripP50Ms = percentile(rtts, 50);
  return {
    samples: o.samples,
    storedHopP50Ms,
    storedHopP99Ms: percentile(hops, 99),
    redisRoundTripP50Ms,
    redisRoundTripP99Ms: percentile(rtts, 99),
    stepLegFloorP50Ms: stepLegFloor(storedHopP50Ms, redisRoundTripP50Ms),
  };
}
