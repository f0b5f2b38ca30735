// A 3-node nats-server cluster with JetStream, and a Redis Cluster of primaries each with replicas, on
// loopback free ports (decision 0015): each node is a harness server (kill, pause, restart, torn down like
// the rest), the cluster wiring is added on top.
import { execFile } from 'node:child_process';
import { get } from 'node:http';
import { promisify } from 'node:util';
import { freePorts, requireBinary } from '@triad/launcher';
import { uniqueNamespace } from './namespace.js';
import { startNats, type NatsServer } from './nats.js';
import { startRedis, type RedisServer } from './redis.js';
import { redisReply } from './resp.js';
import type { Teardown } from './teardown.js';
import { waitFor } from './wait.js';

const run = promisify(execFile);

export interface NatsCluster {
  readonly name: string;
  readonly nodes: readonly NatsServer[];
  /** The client URLs, comma-separated: NATS_URL for a process that may use any of them. */
  readonly urls: string;
  /** Resolves once JetStream's meta group has a leader that the live nodes agree on. */
  waitForJetStream(timeoutMs?: number): Promise<void>;
}

/** Starts `nodes` (default 3) nats-servers with JetStream, routed to each other as one cluster. */
export async function startNatsCluster(opts: { nodes?: number; teardown?: Teardown; readyTimeoutMs?: number } = {}): Promise<NatsCluster> {
  const count = opts.nodes ?? 3;
  const name = uniqueNamespace('natsc');
  const routePorts = await freePorts(count);
  const nodes = await Promise.all(
    routePorts.map((own) =>
      startNats({
        ...(opts.teardown ? { teardown: opts.teardown } : {}),
        readyTimeoutMs: opts.readyTimeoutMs ?? 30_000,
        config: [
          'cluster {',
          `  name: "${name}"`,
          `  listen: "127.0.0.1:${own}"`,
          `  routes: [${routePorts.filter((p) => p !== own).map((p) => `"nats-route://127.0.0.1:${p}"`).join(', ')}]`,
          '}',
        ].join('\n'),
      }),
    ),
  );
  const cluster: NatsCluster = {
    name,
    nodes,
    urls: nodes.map((n) => n.url).join(','),
    waitForJetStream: async (timeoutMs = 30_000) => {
      await waitFor(
        async () => {
          const leaders = new Set<string>();
          for (const n of nodes) {
            const jsz = (await httpJson(`${n.monitorUrl}/jsz`).catch(() => undefined)) as { meta_cluster?: { leader?: string } } | undefined;
            if (jsz === undefined) continue; // a killed node
            const leader = jsz.meta_cluster?.leader;
            if (!leader) return undefined;
            leaders.add(leader);
          }
          return leaders.size === 1 || undefined;
        },
        { timeoutMs, what: `the JetStream meta leader of NATS cluster ${name}` },
      );
    },
  };
  await cluster.waitForJetStream();
  return cluster;
}

export interface RedisCluster {
  readonly nodes: readonly RedisServer[];
  /** `127.0.0.1:PORT,…` of every node: TRIAD_REDIS_CLUSTER. */
  readonly seeds: string;
  /** The node (by port) that serves a key's slot now, from CLUSTER NODES of a live node. */
  primaryFor(key: string): Promise<RedisServer>;
  /** The current primaries, by port. */
  primaries(): Promise<RedisServer[]>;
  /** The live primaries with at least one connected replica (that a failover can replace). */
  replicatedPrimaries(): Promise<RedisServer[]>;
  /**
   * Resolves once every slot is served by a live primary again and the cluster state is ok on the live
   * nodes — after a primary was killed, once its replica was promoted.
   */
  waitForHealthy(timeoutMs?: number): Promise<void>;
}

interface NodeLine {
  id: string;
  port: number;
  flags: string[];
  primaryId: string;
  slots: [number, number][];
}

/** CLUSTER NODES as rows. */
function parseNodes(text: string): NodeLine[] {
  return text
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((line) => {
      const f = line.trim().split(' ');
      const port = Number(/:(\d+)@/.exec(f[1] ?? '')?.[1] ?? 0);
      const slots: [number, number][] = [];
      for (const s of f.slice(8)) {
        if (s.startsWith('[')) continue; // a slot being migrated
        const [a, b] = s.split('-').map(Number);
        if (a !== undefined && !Number.isNaN(a)) slots.push([a, b ?? a]);
      }
      return { id: f[0] ?? '', port, flags: (f[2] ?? '').split(','), primaryId: f[3] ?? '-', slots };
    });
}

/**
 * Starts `primaries` × (1 + `replicas`) redis-servers in cluster mode with AOF (default 3 primaries, 1
 * replica each), joins them with `redis-cli --cluster create`, and waits for the cluster to be ok. A
 * node is declared failed after `nodeTimeoutMs` (default 2 s), and a replica then takes over its slots.
 */
export async function startRedisCluster(
  opts: { primaries?: number; replicas?: number; teardown?: Teardown; nodeTimeoutMs?: number } = {},
): Promise<RedisCluster> {
  const primaries = opts.primaries ?? 3;
  const replicas = opts.replicas ?? 1;
  const cli = requireBinary('redis-cli');
  const nodes = await Promise.all(
    Array.from({ length: primaries * (1 + replicas) }, () =>
      startRedis({
        ...(opts.teardown ? { teardown: opts.teardown } : {}),
        extraArgs: [
          '--cluster-enabled', 'yes',
          '--cluster-config-file', 'nodes.conf',
          '--cluster-node-timeout', String(opts.nodeTimeoutMs ?? 2_000),
          // A replica takes over however long it was cut off from its primary (tests kill primaries).
          '--cluster-replica-validity-factor', '0',
        ],
      }),
    ),
  );
  const seeds = nodes.map((n) => `127.0.0.1:${n.port}`);
  await run(cli, ['--cluster', 'create', ...seeds, '--cluster-replicas', String(replicas), '--cluster-yes'], { timeout: 60_000 });

  const live = async (): Promise<RedisServer[]> => {
    const up: RedisServer[] = [];
    for (const n of nodes) if ((await redisReply(n.url, ['PING'], { timeoutMs: 500 }).catch(() => undefined)) === 'PONG') up.push(n);
    return up;
  };
  const view = async (): Promise<NodeLine[]> => {
    for (const n of await live()) {
      const text = await redisReply(n.url, ['CLUSTER', 'NODES'], { timeoutMs: 1_000 }).catch(() => undefined);
      if (typeof text === 'string') return parseNodes(text);
    }
    throw new Error('redis cluster: no node answers CLUSTER NODES');
  };
  const byPort = (port: number): RedisServer => {
    const n = nodes.find((x) => x.port === port);
    if (!n) throw new Error(`redis cluster: no node on port ${port}`);
    return n;
  };
  const cluster: RedisCluster = {
    nodes,
    seeds: seeds.join(','),
    primaryFor: async (key) => {
      const slot = Number(await redisReply((await live())[0]?.url ?? nodes[0]!.url, ['CLUSTER', 'KEYSLOT', key]));
      const owner = (await view()).find((l) => l.flags.includes('master') && !l.flags.includes('fail') && l.slots.some(([a, b]) => slot >= a && slot <= b));
      if (!owner) throw new Error(`redis cluster: no live primary serves slot ${slot}`);
      return byPort(owner.port);
    },
    primaries: async () => (await view()).filter((l) => l.flags.includes('master') && !l.flags.includes('fail')).map((l) => byPort(l.port)),
    replicatedPrimaries: async () => {
      const out: RedisServer[] = [];
      for (const n of await cluster.primaries()) {
        const info = await redisReply(n.url, ['INFO', 'replication'], { timeoutMs: 1_000 }).catch(() => '');
        if (typeof info === 'string' && /^connected_slaves:[1-9]/m.test(info)) out.push(n);
      }
      return out;
    },
    waitForHealthy: async (timeoutMs = 60_000) => {
      await waitFor(
        async () => {
          const up = await live();
          for (const n of up) {
            const info = await redisReply(n.url, ['CLUSTER', 'INFO'], { timeoutMs: 1_000 }).catch(() => '');
            if (typeof info !== 'string' || !/cluster_state:ok/.test(info)) return undefined;
          }
          const upPorts = new Set(up.map((n) => n.port));
          let covered = 0;
          for (const l of await view()) if (l.flags.includes('master') && upPorts.has(l.port)) for (const [a, b] of l.slots) covered += b - a + 1;
          return covered === 16_384 || undefined;
        },
        { timeoutMs, what: 'every Redis Cluster slot served by a live primary, cluster_state:ok on every live node' },
      );
    },
  };
  await cluster.waitForHealthy();
  return cluster;
}

/** GET a JSON document, without keep-alive. */
function httpJson(url: string): Promise<unknown> {
  return new Promise((resolve, reject) => {
    const request = get(url, { agent: false, timeout: 1_000 }, (response) => {
      let body = '';
      response.setEncoding('utf8');
      response.on('data', (c: string) => (body += c));
      response.on('end', () => {
        try {
          resolve(JSON.parse(body));
        } catch (e) {
          reject(e instanceof Error ? e : new Error(String(e)));
        }
      });
    });
    request.once('timeout', () => request.destroy(new Error(`GET ${url} timed out`)));
    request.once('error', reject);
  });
}
