/**
 * A 3-node NATS cluster with JetStream on every node, on free loopback ports, each node's store in the
 * run's scratch directory: the bench's `--mode scaling-cluster` and `--durable` (on a nats-server older
 * than 2.10, where an acknowledgement is durable because a quorum of the R3 stream holds the message).
 */
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { freePorts, natsServerArgs, requireBinary, startProcess, type StartedProcess } from '@triad/launcher';
import type { ProcessRef } from './cpu.js';
import { sleep } from './timing.js';

export interface NatsCluster {
  /** The client URLs of the three nodes, comma-separated (what NATS_URL takes). */
  url: string;
  /** Each node's HTTP monitoring endpoint. */
  monitors: string[];
  processes: ProcessRef[];
  stop(): Promise<void>;
}

/** Starts the three nodes and waits until they agree on a JetStream meta leader. */
export async function startNatsCluster(tmpDir: string, o: { label: string; purpose: { by: string } }): Promise<NatsCluster> {
  const children: StartedProcess[] = [];
  const stop = async (): Promise<void> => {
    await Promise.all(children.map((c) => c.stop(5_000)));
  };
  try {
    const ports = await freePorts(9); // 3 × (client, monitor, route)
    const clusterName = `${o.label}-${Date.now().toString(36)}`;
    const routes = [2, 5, 8].map((i) => ports[i] as number);
    for (let i = 0; i < 3; i++) {
      const [port, monitor, route] = [ports[i * 3], ports[i * 3 + 1], ports[i * 3 + 2]].map((p) => p as number) as [number, number, number];
      const dir = join(tmpDir, `${o.label}-${i}`);
      mkdirSync(dir, { recursive: true });
      children.push(
        await startProcess({
          name: `${o.label}-${i}`,
          command: requireBinary('nats-server', o.purpose),
          args: natsServerArgs({
            port,
            monitorPort: monitor,
            storeDir: dir,
            serverName: `${clusterName}-${i}`,
            extra: ['--cluster_name', clusterName, '--cluster', `nats://127.0.0.1:${route}`, '--routes', routes.filter((r) => r !== route).map((r) => `nats://127.0.0.1:${r}`).join(',')],
          }),
        }),
      );
    }
    const monitors = [1, 4, 7].map((i) => `http://127.0.0.1:${ports[i] as number}`);
    await waitUntil(async () => {
      const leaders = await Promise.all(monitors.map(async (m) => ((await (await fetch(`${m}/jsz`)).json()) as { meta_cluster?: { leader?: string } }).meta_cluster?.leader));
      return leaders.every((l) => l && l === leaders[0]);
    }, 'the NATS cluster to elect a JetStream meta leader');
    return {
      url: [0, 3, 6].map((i) => `nats://127.0.0.1:${ports[i] as number}`).join(','),
      monitors,
      processes: children.map((c) => ({ name: c.name, pid: c.pid })),
      stop,
    };
  } catch (e) {
    await stop();
    throw e;
  }
}

export async function waitUntil(check: () => Promise<boolean | undefined>, what: string, timeoutMs = 60_000): Promise<void> {
  const t0 = Date.now();
  for (;;) {
    if (await check().catch(() => false)) return;
    if (Date.now() - t0 > timeoutMs) throw new Error(`bench: waited ${timeoutMs} ms for ${what}`);
    await sleep(200);
  }
}
