// Starts a Triad for one test namespace: actors as real processes (scheduler, supervisor, order agents)
// against given NATS and Redis servers, the example's remote services in-process (so tests can read
// their effects and turn fault knobs), and a client.
import { execFile } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { TriadClient, clientOptionsFromEnv } from '@triad/client';
import { ordersWorkflow, startRemoteService, type Faults, type RemoteService } from '@triad/example-orders';
import { type LadderInput, type RetryPolicy, type WorkflowDefinitionInput } from '@triad/protocol';
import { redisOptionsFromEnv } from '@triad/settings';
import { connectStore, type RedisClient } from '@triad/store';
import { startProcess, uniqueNamespace, type ActorProcess, type Teardown } from '../harness/index.js';

/**
 * The repository root — the workspace root, whose package.json declares `workspaces` (as the CLI and
 * npm start find it) — from the source or the compiled test/dist copy.
 */
export const ROOT = ((): string => {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (;;) {
    const manifest = join(dir, 'package.json');
    if (existsSync(manifest) && (JSON.parse(readFileSync(manifest, 'utf8')) as { workspaces?: unknown }).workspaces !== undefined) return dir;
    const up = dirname(dir);
    if (up === dir) throw new Error(`no package.json with workspaces above ${fileURLToPath(import.meta.url)}: cannot find the repository root`);
    dir = up;
  }
})();

export const SCRIPTS = {
  scheduler: 'apps/scheduler/dist/main.js',
  supervisor: 'apps/supervisor/dist/main.js',
  orderAgents: 'apps/example-orders/dist/agents.js',
  agentHost: 'apps/agent/dist/main.js',
  cli: 'apps/cli/bin/triad.js',
  /** Compiled by the test workspace's build (tsc -b test). */
  sagaAgents: 'test/dist/support/saga-agents.js',
} as const;

export const SERVICE_NAMES = ['inventory', 'fraud', 'payment', 'shipping'] as const;
export type ServiceName = (typeof SERVICE_NAMES)[number];

export interface Servers {
  nats: { url: string };
  redis: { url: string };
}

/** The supervisor process' tunables (its TRIAD_* environment); unset ones keep the service's defaults. */
export interface SupervisorOptions {
  intervalMs?: number;
  leaseMs?: number;
  retentionMs?: number;
  /** TRIAD_COMPACT_AFTER_MS: 0 compacts finished tasks on the next sweep (the default is 10 min). */
  compactAfterMs?: number;
  /** TRIAD_OBJECT_GC_GRACE_MS: how old an unreferenced payload object must be before the GC deletes it. */
  objectGcGraceMs?: number;
}

export interface TriadOptions {
  namespace?: string;
  schedulers?: number;
  agentProcesses?: number;
  supervisor?: false | SupervisorOptions;
  /** How many supervisor processes start with these options (default 1; one of them leads). */
  supervisors?: number;
  /** The source of randomness of each in-process service's fault decisions (seeded runs); default Math.random. */
  serviceRandom?: (service: ServiceName) => () => number;
  faults?: Partial<Record<ServiceName, Partial<Faults>>>;
  registerOrders?: boolean;
  /**
   * Extra environment for every actor process — and for the test's own client and Redis connection,
   * which read it as the actors do (e.g. NATS_USER, NATS_TLS_CA, REDIS_URL with a password, REDIS_TLS_CA).
   */
  env?: Record<string, string>;
  /**
   * Environment per role on top of `env`, so each actor runs on its own identity (decision 0016):
   * e.g. the scheduler's NATS_NKEY_SEED and REDIS_URL from `triad auth init`'s scheduler.env; `client`
   * is the test's own client.
   */
  roleEnv?: Partial<Record<'scheduler' | 'supervisor' | 'client', Record<string, string>>>;
}

export interface TestTriad {
  namespace: string;
  env: Record<string, string>;
  client: TriadClient;
  /** One Redis, or the Redis Cluster TRIAD_REDIS_CLUSTER names (in `env`). */
  redis: RedisClient;
  services: Record<ServiceName, RemoteService>;
  schedulers: ActorProcess[];
  supervisors: ActorProcess[];
  agents: ActorProcess[];
  startScheduler(): Promise<ActorProcess>;
  startSupervisor(o?: SupervisorOptions): Promise<ActorProcess>;
  startAgents(extraEnv?: Record<string, string>): Promise<ActorProcess>;
  /** Starts the generic agent host with the scripted saga `worker` agent (test/support/saga-agents.ts). */
  startSagaAgents(): Promise<ActorProcess>;
  /** The ledger service the saga worker applies and undoes its effects on. */
  ledger: RemoteService;
}

export async function startTriad(td: Teardown, servers: Servers, o: TriadOptions = {}): Promise<TestTriad> {
  const namespace = o.namespace ?? uniqueNamespace('triad');
  const services = {} as TestTriad['services'];
  for (const name of SERVICE_NAMES) {
    const random = o.serviceRandom?.(name);
    const s = await startRemoteService({ name, port: 0, faults: o.faults?.[name] ?? {}, ...(random ? { random } : {}) });
    td.add(() => s.close());
    services[name] = s;
  }
  const ledger = await startRemoteService({ name: 'ledger', port: 0 });
  td.add(() => ledger.close());
  const env: Record<string, string> = {
    NATS_URL: servers.nats.url,
    REDIS_URL: servers.redis.url,
    TRIAD_NAMESPACE: namespace,
    TRIAD_LOG_LEVEL: 'info',
    INVENTORY_URL: services.inventory.url,
    PAYMENT_URL: services.payment.url,
    SHIPPING_URL: services.shipping.url,
    FRAUD_URL: services.fraud.url,
    LEDGER_URL: ledger.url,
    // Tests register the definitions they run (often their own `orders`): the agents must not race them.
    ORDERS_REGISTER_WORKFLOW: 'false',
    ...o.env,
  };
  // Numbered when the start is asked for, not when it is ready, so processes started together get distinct names.
  const started = { scheduler: 0, supervisor: 0, agents: 0 };
  const t: TestTriad = {
    namespace,
    env,
    client: undefined as unknown as TriadClient,
    // The same connect path as the actors', with the same settings.
    redis: await connectStore(redisOptionsFromEnv(env), { connectionName: 'triad-test' }),
    services,
    schedulers: [],
    supervisors: [],
    agents: [],
    startScheduler: async () => {
      const p = await startProcess({ name: `scheduler-${++started.scheduler}`, args: [SCRIPTS.scheduler], env: { ...env, ...o.roleEnv?.scheduler }, cwd: ROOT, readyPattern: /scheduler ready/, teardown: td });
      t.schedulers.push(p);
      return p;
    },
    startSupervisor: async (s = {}) => {
      const p = await startProcess({
        name: `supervisor-${++started.supervisor}`,
        args: [SCRIPTS.supervisor],
        env: {
          ...env,
          ...o.roleEnv?.supervisor,
          TRIAD_SUPERVISOR_INTERVAL_MS: String(s.intervalMs ?? 200),
          TRIAD_SUPERVISOR_LEASE_MS: String(s.leaseMs ?? 2_000),
          ...(s.retentionMs !== undefined ? { TRIAD_RETENTION_MS: String(s.retentionMs) } : {}),
          ...(s.compactAfterMs !== undefined ? { TRIAD_COMPACT_AFTER_MS: String(s.compactAfterMs) } : {}),
          ...(s.objectGcGraceMs !== undefined ? { TRIAD_OBJECT_GC_GRACE_MS: String(s.objectGcGraceMs) } : {}),
        },
        cwd: ROOT,
        readyPattern: /supervisor ready/,
        teardown: td,
      });
      t.supervisors.push(p);
      return p;
    },
    ledger,
    startSagaAgents: async () => {
      const p = await startProcess({ name: `saga-agents-${++started.agents}`, args: [SCRIPTS.agentHost, SCRIPTS.sagaAgents], env, cwd: ROOT, readyPattern: /agent-host ready/, teardown: td });
      t.agents.push(p);
      return p;
    },
    startAgents: async (extra = {}) => {
      const p = await startProcess({ name: `agents-${++started.agents}`, args: [SCRIPTS.orderAgents], env: { ...env, ...extra }, cwd: ROOT, readyPattern: /order-agents ready/, teardown: td });
      t.agents.push(p);
      return p;
    },
  };
  td.add(() => void t.redis.disconnect());
  const starts: Promise<unknown>[] = [];
  for (let i = 0; i < (o.schedulers ?? 1); i++) starts.push(t.startScheduler());
  for (let i = 0; i < (o.agentProcesses ?? 1); i++) starts.push(t.startAgents());
  if (o.supervisor !== false) for (let i = 0; i < (o.supervisors ?? 1); i++) starts.push(t.startSupervisor(o.supervisor ?? {}));
  await Promise.all(starts);
  t.client = await TriadClient.connect(clientOptionsFromEnv({ ...env, ...o.roleEnv?.client }));
  td.add(() => t.client.close());
  // Agents wait for a scheduler to create the streams, then attach their consumers: with a scheduler
  // running, wait for those consumers too, so a registration right after sees every agent (no "never
  // connected" warning). Asked of JetStream, not read from logs (an agent may log at warn only).
  if (t.schedulers.length > 0 && o.agentProcesses !== 0) await waitForAgentConsumers(t.client, agentTypes(env));
  if (o.registerOrders !== false) await t.client.registerWorkflow(ordersWorkflow);
  return t;
}

/** The agent types the example's agent host serves with this environment (ORDERS_AGENTS, default all four). */
function agentTypes(env: Record<string, string>): string[] {
  return (env['ORDERS_AGENTS']?.trim() || SERVICE_NAMES.join(',')).split(',').map((x) => x.trim()).filter((x) => x !== '');
}

/** Waits until every agent type has its durable consumer on the steps stream (its agent attached). */
async function waitForAgentConsumers(client: TriadClient, types: readonly string[]): Promise<void> {
  const n = client.bus.names;
  const want = types.map((a) => n.consumers.agent(a));
  const deadline = Date.now() + 60_000;
  for (;;) {
    const have = new Set<string>();
    try {
      for await (const c of client.bus.jsm.consumers.list(n.streams.steps)) have.add(c.name);
    } catch {
      // the stream may not be there yet
    }
    const missing = want.filter((c) => !have.has(c));
    if (missing.length === 0) return;
    if (Date.now() > deadline) throw new Error(`agents did not attach within 60 s: no consumer ${missing.join(', ')} on ${n.streams.steps}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/**
 * The three-step orders workflow (reserve → charge → ship, as in the pattern) with short budgets and a
 * given ladder, so fault tests notice faults in about a second.
 */
export function fastOrders(o: { budgetMs: number; retry: RetryPolicy; ladder: LadderInput }): WorkflowDefinitionInput {
  return {
    name: 'orders',
    defaults: { retry: o.retry, ladder: o.ladder },
    steps: [
      { name: 'reserve', agent: 'inventory', budgetMs: o.budgetMs },
      { name: 'charge', agent: 'payment', budgetMs: o.budgetMs, dependsOn: ['reserve'] },
      { name: 'ship', agent: 'shipping', budgetMs: o.budgetMs, dependsOn: ['charge'] },
    ],
  };
}

/**
 * The example's own `orders` workflow (reserve ∥ fraud → approval above 1000 → charge → ship, undone on failure) with short
 * budgets and a given ladder, so fault tests see a whole ladder in seconds. `steps` overrides per step.
 */
export function fastExampleOrders(o: {
  budgetMs: number;
  compensateBudgetMs?: number;
  retry: RetryPolicy;
  ladder: LadderInput;
  steps?: Partial<Record<'reserve' | 'fraud' | 'charge' | 'ship', { budgetMs?: number; ladder?: LadderInput; compensateBudgetMs?: number }>>;
  deadlineMs?: number;
  /** Keep the example's fan-out of `ship` over the reservation's lines (default: ship as one call). */
  fanOut?: boolean;
}): WorkflowDefinitionInput {
  const base = ordersWorkflow.toJSON();
  return {
    ...base,
    defaults: { retry: o.retry, ladder: o.ladder },
    ...(o.deadlineMs !== undefined ? { deadlineMs: o.deadlineMs } : {}),
    steps: base.steps.map((s) => {
      if (s.agent === undefined) return s; // the approval wait: no agent, no budget
      const over = o.steps?.[s.name as 'reserve'] ?? {};
      // `ship` as one call unless asked: these fault tests read a step's own ladder, breaker refusals and
      // effect, which a fan-out step keeps per element (its faults are fanout.test.ts's and the chaos run's).
      const { forEach: _forEach, maxParallel: _maxParallel, maxItems: _maxItems, ...plain } = s;
      const shape = o.fanOut === true ? s : plain;
      return {
        ...shape,
        budgetMs: over.budgetMs ?? o.budgetMs,
        ...(over.ladder ? { ladder: over.ladder } : {}),
        ...(s.compensate ? { compensate: { ...s.compensate, budgetMs: over.compensateBudgetMs ?? o.compensateBudgetMs ?? o.budgetMs } } : {}),
      };
    }),
  };
}

/** Runs the triad CLI against a test Triad (or any environment); resolves with its output and exit code (never rejects). */
export function cli(t: Pick<TestTriad, 'env'>, args: string[]): Promise<{ stdout: string; stderr: string; code: number }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [SCRIPTS.cli, ...args], { cwd: ROOT, env: { ...process.env, ...t.env }, timeout: 60_000 }, (error, stdout, stderr) => {
      const code = error ? (typeof error.code === 'number' ? error.code : 1) : 0;
      resolve({ stdout, stderr, code });
    });
  });
}

/** The CLI as a user runs it; resolves with its stdout, or fails the test with its output when it does not exit 0. */
export async function cliOk(t: Pick<TestTriad, 'env'>, ...args: string[]): Promise<string> {
  const r = await cli(t, args);
  if (r.code !== 0) throw new Error(`triad ${args.join(' ')} exited ${r.code}\n${r.stdout}\n${r.stderr}`);
  return r.stdout;
}

/** Effects per idempotency key: every key must have been applied exactly once. */
export function effectCounts(s: RemoteService): Map<string, number> {
  const m = new Map<string, number>();
  for (const e of s.effects()) m.set(e.idempotencyKey, (m.get(e.idempotencyKey) ?? 0) + 1);
  return m;
}
