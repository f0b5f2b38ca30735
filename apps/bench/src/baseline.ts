/**
 * The baseline: the raw JetStream limit of Triad's design on this machine. This process publishes-with-ack
 * to a work-queue stream; a second process (baseline-echo.ts) consumes each message and publishes-with-ack
 * a reply to a second work-queue stream, which this process consumes back. N chains of S hops run at
 * once, with the same in-flight limits as Triad's scheduler and agents — one hop per step.
 */
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { AckPolicy, DeliverPolicy, DiscardPolicy, RetentionPolicy, StorageType, jetstream, jetstreamManager } from '@nats-io/jetstream';
import { nanos } from '@nats-io/nats-core';
import { startProcess } from '@triad/launcher';
import { DEFAULT_NATS_URL, type NatsConnectionOptions } from '@triad/settings';
import { REPO_ROOT } from './actors.js';
import { baselineConnection, baselineNames, pump } from './pump.js';
import { withTimeout } from './timing.js';
import { batchTimeoutMs } from './batch.js';
import { perStep, readCounters } from './counters.js';
import { cpuWindow, processRole, type CpuShare, type ProcessRef } from './cpu.js';

export interface BaselineOptions {
  nats: NatsConnectionOptions;
  namespace: string;
  chains: number;
  hops: number;
  /** In-flight replies handled at once by this process (Triad's scheduler: 64 per consumer). */
  driverConcurrency: number;
  /** In-flight requests handled at once by the echo process (Triad's agents: 32 per process, times K). */
  echoConcurrency: number;
  /** Bytes per message (about the size of a Triad step request). */
  payloadBytes: number;
  /** Chains of an unmeasured burst run first. */
  warmupChains: number;
  natsMonitorUrl?: string;
  /** Replicas of the two streams (the run's: 3 on a cluster). */
  replicas?: number;
  /** Server processes to include in the CPU accounting. */
  servers: readonly ProcessRef[];
}

export interface BaselineResult {
  roundTrips: number;
  elapsedMs: number;
  roundTripsPerSec: number;
  /** Messages into / out of nats-server per round trip (JetStream API, acks and pulls included). */
  natsInPerRoundTrip?: number;
  natsOutPerRoundTrip?: number;
  cpu: CpuShare[];
}

export async function measureBaseline(o: BaselineOptions): Promise<BaselineResult> {
  const n = baselineNames(o.namespace);
  const nc = await baselineConnection(o.nats, o.namespace, 'bench-baseline-driver');
  const jsm = await jetstreamManager(nc, { timeout: 10_000 });
  const js = jetstream(nc, { timeout: 10_000 });
  // The same stream settings as Triad's work queues (packages/bus/src/topology.ts).
  for (const [name, subject] of [[n.reqStream, n.reqSubject], [n.repStream, n.repSubject]] as const) {
    await jsm.streams.add({ name, subjects: [subject], retention: RetentionPolicy.Workqueue, storage: StorageType.File, num_replicas: o.replicas ?? 1, duplicate_window: nanos(120_000), discard: DiscardPolicy.Old });
  }
  const consumer = (stream: string, durable: string, subject: string) =>
    jsm.consumers.add(stream, { durable_name: durable, ack_policy: AckPolicy.Explicit, deliver_policy: DeliverPolicy.All, filter_subject: subject, ack_wait: nanos(30_000), max_deliver: -1, max_ack_pending: 10_000 });
  await consumer(n.reqStream, 'echo', n.reqSubject);
  await consumer(n.repStream, 'driver', n.repSubject);

  const echo = await startProcess({
    name: 'baseline-echo',
    args: [join(REPO_ROOT, 'apps/bench/dist/baseline-echo.js')],
    cwd: REPO_ROOT,
    // The NATS credentials and TLS settings, if any, come with the environment the bench runs in.
    env: { NATS_URL: o.nats.url ?? DEFAULT_NATS_URL, BENCH_NAMESPACE: o.namespace, BENCH_ECHO_CONCURRENCY: String(o.echoConcurrency) },
  });
  let failure: unknown;
  try {
    await echo.waitForOutput(/baseline-echo ready/, 30_000);
    let round = 0;
    let finished = 0;
    let chains = 0;
    let allDone: () => void = () => undefined;
    const message = (chain: number, hop: number): Uint8Array => {
      const b = new Uint8Array(o.payloadBytes);
      const v = new DataView(b.buffer);
      v.setUint32(0, chain);
      v.setUint32(4, hop);
      return b;
    };
    const send = (chain: number, hop: number) => js.publish(n.reqSubject, message(chain, hop), { msgID: `req:${round}:${chain}:${hop}` });
    const driver = await pump(
      await js.consumers.get(n.repStream, 'driver'),
      o.driverConcurrency,
      async (m) => {
        const v = new DataView(m.data.buffer, m.data.byteOffset, m.data.byteLength);
        const chain = v.getUint32(0);
        const hop = v.getUint32(4);
        // Like the scheduler: the next hop is stored before the reply that caused it is acknowledged.
        if (hop < o.hops) await send(chain, hop + 1);
        m.ack();
        if (hop >= o.hops && ++finished === chains) allDone();
      },
      (e) => (failure ??= e),
    );
    /** One burst of `count` chains; resolves with its duration in ms. */
    const burst = async (count: number): Promise<number> => {
      round++;
      finished = 0;
      chains = count;
      const done = new Promise<void>((r) => (allDone = r));
      const t0 = performance.now();
      // Every chain starts at once, as a burst of submissions does.
      await Promise.all(Array.from({ length: count }, (_, c) => send(c, 1)));
      await withTimeout(done, batchTimeoutMs(count, o.hops), `baseline (${finished} of ${count} chains finished)`);
      if (failure) throw failure instanceof Error ? failure : new Error(`baseline handler failed: ${JSON.stringify(failure)}`);
      return performance.now() - t0;
    };
    try {
      // A warm-up burst first (JIT, connections, stream files), as Triad's measurement gets one.
      if (o.warmupChains > 0) await burst(o.warmupChains);
      const before = await readCounters(undefined, o.natsMonitorUrl);
      const cpu = cpuWindow([...o.servers.filter((p) => processRole(p.name) === 'nats-server'), { name: 'baseline-echo', pid: echo.pid }]);
      const elapsedMs = await burst(o.chains);
      const shares = cpu.end(elapsedMs).map((c) => (c.name === 'bench client' ? { ...c, name: 'baseline driver (bench client)' } : c));
      const after = await readCounters(undefined, o.natsMonitorUrl);
      const total = o.chains * o.hops;
      const work = perStep(before, after, total);
      return {
        roundTrips: total,
        elapsedMs,
        roundTripsPerSec: total / (elapsedMs / 1000),
        cpu: shares,
        ...(work.natsInPerStep !== undefined ? { natsInPerRoundTrip: work.natsInPerStep, natsOutPerRoundTrip: work.natsOutPerStep } : {}),
      };
    } finally {
      await driver.stop();
    }
  } finally {
    await echo.stop();
    for (const s of [n.reqStream, n.repStream]) await jsm.streams.delete(s).catch(() => false);
    await nc.drain().catch(() => undefined);
  }
}
