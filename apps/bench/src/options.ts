/** The benchmark's command line: every option with its default, validated by commander. */
import { Command, InvalidArgumentError, Option } from 'commander';
import { PEERS, type PeerName } from './peers/peer.js';

export const MODES = ['throughput', 'recovery', 'scan', 'memory', 'scaling'] as const;
/** Modes only run when named (not part of `all`): they start servers of their own. */
export const EXTRA_MODES = ['scaling-cluster', 'limits'] as const;
export type Mode = (typeof MODES)[number] | (typeof EXTRA_MODES)[number];

export interface Options {
  tasks: number;
  steps: number;
  /** Throughput: each task's input carries a payload of about this many bytes, which each step returns (0: none). */
  payloadBytes: number;
  agents: number;
  json: boolean;
  mode: Mode[];
  useEnv: boolean;
  /** Servers that lose no acknowledged write on a power cut (and the peers likewise). */
  durable: boolean;
  peers: PeerName[];
  latencyTasks: number;
  warmup: number;
  recoverySamples: number;
  recoveryBudgetMs: number;
  supervisorIntervalMs: number;
  supervisorLeaseMs: number;
  scanSizes: number[];
  scanLive: number;
  scanRounds: number;
  memoryTasks: number;
  scalingTasks: number;
  scalingRepeats: number;
  scalingClusterTasks: number;
  limitsTasks: number;
  limitsPairs: number;
}

const int = (min: number) => (v: string): number => {
  const n = Number(v);
  if (!Number.isInteger(n) || n < min) throw new InvalidArgumentError(`expected a whole number ≥ ${min}`);
  return n;
};

function parseModes(v: string): Mode[] {
  const out = new Set<Mode>();
  for (const m of v.split(',').map((s) => s.trim())) {
    if (m === 'all') MODES.forEach((x) => out.add(x));
    else if ([...MODES, ...EXTRA_MODES].includes(m as Mode)) out.add(m as Mode);
    else throw new InvalidArgumentError(`unknown mode "${m}" (known: all, ${[...MODES, ...EXTRA_MODES].join(', ')})`);
  }
  return [...out];
}

/** `restate-fsync` is accepted as another name of `restate` (fsync on, its default). */
function parsePeers(v: string): PeerName[] {
  const out = new Set<PeerName>();
  for (const raw of v.split(',').map((s) => s.trim()).filter((s) => s !== '')) {
    const m = raw === 'restate-fsync' ? 'restate' : raw;
    if (m === 'all') PEERS.forEach((x) => out.add(x));
    else if ((PEERS as readonly string[]).includes(m)) out.add(m as PeerName);
    else throw new InvalidArgumentError(`unknown peer "${raw}" (known: all, ${PEERS.join(', ')}, restate-fsync)`);
  }
  return [...out];
}

export function parseOptions(argv: string[]): Options {
  const p = new Command('bench')
    .description('Triad benchmark: throughput, latency, recovery, scan cost, memory and scaling, against BullMQ and Restate (--peers) and the raw JetStream limit, in one run')
    .option('--tasks <n>', 'throughput: tasks submitted at once', int(1), 2000)
    .option('--steps <n>', 'throughput: sequential no-op steps per task', int(1), 3)
    .option('--payload-bytes <n>', 'throughput: a payload of about this many bytes in each task input, returned by each step as its output', int(0), 0)
    .option('--agents <n>', 'agent processes running the no-op agent', int(1), 1)
    .option('--json', 'print one JSON object with the figures as the last line', false)
    .addOption(
      new Option('--mode <modes>', `what to measure, comma-separated: all, ${MODES.join(', ')} (throughput = baseline + throughput + latency); also ${EXTRA_MODES.join(', ')}, only when named`)
        .argParser(parseModes)
        .default([...MODES], 'all'),
    )
    .option('--use-env', 'use NATS_URL and REDIS_URL instead of starting private servers', false)
    .option(
      '--durable',
      'servers that lose no acknowledged write on a power cut: Redis with appendfsync always, JetStream syncing every write (nats-server 2.10+) or a 3-node cluster with R3 streams; the peers likewise (BullMQ on that Redis, Restate with fsync; default peers bullmq,restate)',
      false,
    )
    .addOption(
      new Option('--peers <list>', `also measure the tools a user would pick instead, comma-separated: all, ${PEERS.join(', ')} (with throughput: same tasks, steps and latency runs)`)
        .argParser(parsePeers)
        .default([], 'none'),
    )
    .option('--latency-tasks <n>', 'latency: measured tasks (0 = skip latency)', int(0), 300)
    .option('--warmup <n>', 'latency: unmeasured tasks first', int(0), 50)
    .option('--recovery-samples <n>', 'recovery: agent kills', int(1), 5)
    .option('--recovery-budget-ms <n>', 'recovery: the step budget (complete-by)', int(100), 2000)
    .option('--supervisor-interval-ms <n>', 'supervisor sweep interval', int(10), 500)
    .option('--supervisor-lease-ms <n>', 'supervisor leadership lease', int(100), 2000)
    .addOption(
      new Option('--scan-sizes <list>', 'scan: finished-task counts to compare, comma-separated')
        .argParser((v) => v.split(',').map((s) => int(1)(s.trim())))
        .default([10_000, 1_000_000], '10000,1000000'),
    )
    .option('--scan-live <n>', 'scan: live expired deadlines', int(1), 300)
    .option('--scan-rounds <n>', 'scan: sweeps measured per size', int(1), 10)
    .option('--memory-tasks <n>', 'memory: finished tasks created', int(1), 1000)
    .option('--scaling-tasks <n>', 'scaling: io10 tasks per measurement', int(1), 400)
    .option('--scaling-repeats <n>', 'scaling: 1-agent / 2-agent pairs, alternating', int(1), 2)
    .option('--limits-tasks <n>', 'limits (only when named): no-op 3-step tasks per run, unlimited and with the agent type limited at a concurrency never reached', int(1), 1000)
    .option('--limits-pairs <n>', 'limits: unlimited / limited pairs, alternating which goes first', int(1), 3)
    .option('--scaling-cluster-tasks <n>', 'scaling-cluster (only when named): no-op 3-step tasks per measurement, single servers vs clusters, 1/2/4 processes', int(1), 300)
    .showHelpAfterError('(bench --help lists the options)')
    .parse(argv);
  const o = p.opts<Options>();
  if (o.durable) {
    if (o.useEnv) p.error('--durable starts servers whose fsync it sets: run it without --use-env (or configure your servers so and run without --durable)');
    if (o.peers.includes('restate-nofsync')) p.error('--durable compares durable systems: restate-nofsync turns fsync off; name restate instead');
    // The comparison: BullMQ on a Redis with appendfsync always, Restate with fsync.
    if (p.getOptionValueSource('peers') === 'default') o.peers = ['bullmq', 'restate'];
  }
  return o;
}
