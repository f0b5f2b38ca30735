/**
 * `npm start`: a whole local Triad — NATS and Redis (started privately when none is configured), the
 * example's remote services, a scheduler, a supervisor and the order agents as separate processes —
 * registers the `orders` workflow and submits a demo order every few seconds, printing its progress.
 */
import { mkdirSync, openSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { LOCAL_DATA_FOLDER, localOperatorFile, lookupLocalOperator, workspaceRoot } from '@triad/cli';
import { TriadClient, clientOptionsFromEnv } from '@triad/client';
import { ordersWorkflow } from '@triad/example-orders';
import { killChildrenOnSignals, spawnTracked, terminate, type TrackedChild } from '@triad/launcher';
import { errorMessage, type TaskEvent } from '@triad/protocol';
import { DEFAULT_NATS_URL, loadConfig, redactUrl } from '@triad/settings';
import { startTracing } from '@triad/service';
import { LOCAL_AGENTS, ensureLocalAuth, moveGlobalStreams, natsAuthConfigured, type LocalAuth } from './auth.js';
import { SERVER_STOP_GRACE_MS, ensureNats, ensureRedis, type StartedServer } from './servers.js';
import { chooseServicePorts } from './service-ports.js';

/** The workspace root (the package.json with `workspaces`), found as the CLI finds it. */
const ROOT = workspaceRoot(dirname(fileURLToPath(import.meta.url))) ?? resolve(fileURLToPath(new URL('../../../', import.meta.url)));
const DATA = join(ROOT, LOCAL_DATA_FOLDER);
const DEMO_INTERVAL_MS = Number(process.env['TRIAD_DEMO_INTERVAL_MS'] ?? 5_000);
/** The demo's second order is large: it waits for the signal approved, which the demo sends this much later. */
const DEMO_LARGE_ORDER = 2;
const DEMO_LARGE_AMOUNT = 1500;
const DEMO_APPROVE_AFTER_MS = 3_000;

/** `httpOffset`: with TRIAD_HTTP_PORT=P, the actor serves /metrics, /healthz and /readyz on P + offset (decision 0013). */
const ACTORS: { name: string; script: string; httpOffset?: number }[] = [
  { name: 'services', script: 'apps/example-orders/dist/services/main.js' },
  { name: 'scheduler', script: 'apps/scheduler/dist/main.js', httpOffset: 0 },
  { name: 'supervisor', script: 'apps/supervisor/dist/main.js', httpOffset: 1 },
  { name: 'agents', script: 'apps/example-orders/dist/agents.js', httpOffset: 2 },
];

/**
 * The actor's environment: TRIAD_HTTP_PORT=P becomes P, P+1, P+2 (one port each). Anything else (0: a
 * free port each; a bad value: the actor refuses it with the reason) is passed on as it is.
 */
function actorEnv(a: (typeof ACTORS)[number]): NodeJS.ProcessEnv {
  const base = Number(process.env['TRIAD_HTTP_PORT']?.trim() || NaN);
  if (a.httpOffset === undefined || !Number.isInteger(base) || base <= 0) return process.env;
  return { ...process.env, TRIAD_HTTP_PORT: String(base + a.httpOffset) };
}

/** The last lines of an actor's log, to show why it stopped without sending anyone to the file first. */
function logTail(file: string, lines = 15): string {
  try {
    const text = readFileSync(file, 'utf8').trimEnd().split('\n');
    return text.slice(-lines).map((l) => `  | ${l}`).join('\n');
  } catch {
    return '';
  }
}

function time(at: number): string {
  return new Date(at).toISOString().slice(11, 23);
}

/** One to three order lines, so the demo shows `ship` fanning out: one shipping call per line. */
function demoItems(n: number): { sku: string; qty: number }[] {
  return DEMO_SKUS.slice(0, 1 + (n % 3)).map((sku, i) => ({ sku, qty: 1 + ((n + i) % 2) }));
}
const DEMO_SKUS = ['A1', 'B7', 'C3'] as const;

function describe(e: TaskEvent): string {
  // A fan-out element's event names its element: ship[1]#1 (decision 0019 §4).
  const where = e.step ? ` ${e.step}${e.item !== undefined ? `[${e.item}]` : ''}${e.attempt ? `#${e.attempt}` : ''}` : '';
  return `${time(e.at)}  ${e.taskId.slice(0, 12)}  ${e.type}${where}${e.reason ? `  (${e.reason})` : ''}`;
}

/**
 * What to type in another shell, and which identity the CLI will use there: decided by the CLI's own
 * lookup (apps/cli/src/local-credentials.ts) with the settings that shell needs, so it cannot differ.
 */
function printNextSteps(namespace: string, secured: boolean): void {
  const natsUrl = process.env['NATS_URL']?.trim();
  const ns = process.env['TRIAD_NAMESPACE']?.trim();
  // Only what differs from the defaults needs repeating in the other shell.
  const exports = [...(natsUrl && natsUrl !== DEFAULT_NATS_URL ? [`NATS_URL=${natsUrl}`] : []), ...(ns && !secured ? [`TRIAD_NAMESPACE=${ns}`] : [])];
  const shellEnv: NodeJS.ProcessEnv = { ...(natsUrl ? { NATS_URL: natsUrl } : {}), ...(ns ? { TRIAD_NAMESPACE: ns } : {}) };
  if (secured) {
    const found = lookupLocalOperator(shellEnv, localOperatorFile(ROOT));
    if (found.used) {
      console.log(`npx triad run from ${ROOT} uses the operator identity in ${found.file} by itself (namespace ${namespace}), as long as no NATS credentials are set in its shell.`);
    } else {
      // Not expected; but if the CLI would not find it, say how to give it the identity by hand.
      console.log(`npx triad will not find the operator identity by itself (${found.why}): in the other shell run  set -a; . ${join(DATA, 'auth', 'operator.env')}; set +a`);
    }
  }
  console.log('In another shell, from this repository:');
  if (exports.length > 0) console.log(`  export ${exports.join(' ')}`);
  console.log(`  npx triad submit orders --input '{"orderId":"o1","amount":42}' --wait --json`);
  console.log(`  npx triad submit orders --input '{"orderId":"o3","amount":1500}'`);
  console.log('  npx triad signal <taskId> approved --data \'{"approvedBy":"me"}\'');
  console.log('  npx triad list');
  console.log('  npx triad watch <taskId>');
  console.log('  npx triad dashboard');
}

async function main(): Promise<void> {
  const config = loadConfig();
  // With OTEL_* set, the demo orders' submissions are traced too: each order is one trace from here on.
  const tracing = startTracing('triad-local');
  mkdirSync(join(DATA, 'logs'), { recursive: true });
  const servers: StartedServer[] = [];
  const children: TrackedChild[] = [];
  let client: TriadClient | undefined;
  let demo: NodeJS.Timeout | undefined;
  let stopping = false;

  const stop = async (code: number): Promise<void> => {
    if (stopping) return;
    stopping = true;
    if (demo) clearInterval(demo);
    await client?.close().catch(() => undefined);
    await tracing?.shutdown().catch(() => undefined);
    // The actors first (they still use the servers while they shut down), each SIGTERM then SIGKILL after 5 s.
    await Promise.all(children.map((c) => terminate(c, 5_000)));
    await Promise.all(servers.map((s) => terminate(s.child, SERVER_STOP_GRACE_MS)));
    process.exit(code);
  };
  // Stopped gracefully by stop() above; the launcher's exit hook and reaper catch what a crash leaves.
  killChildrenOnSignals(false);
  process.on('SIGINT', () => void stop(0));
  process.on('SIGTERM', () => void stop(0));

  try {
    // With several servers configured, the first one decides whether a private one is started.
    const natsUrl = config.natsUrl.split(',')[0] ?? config.natsUrl;
    // Servers started here are secured with .triad/auth (each actor its own identity), unless the
    // environment brings its own NATS credentials or a Redis password (decision 0016).
    const redisHasUser = new URL(config.redisUrl).password !== '';
    const auth: LocalAuth | undefined = natsAuthConfigured(process.env) || config.natsUrl.includes(',') ? undefined : await ensureLocalAuth(DATA, { namespace: config.namespace, natsUrl, redisUrl: config.redisUrl });
    const moveStreams = auth
      ? (dir: string): void => {
          const moved = moveGlobalStreams(dir, auth.account);
          if (moved) console.log(moved);
        }
      : undefined;
    const [nats, redis] = await Promise.all([ensureNats(natsUrl, DATA, auth?.natsConfig, moveStreams), ensureRedis(config.redisUrl, DATA, auth && !redisHasUser ? auth.redisAclFile : undefined)]);
    if (nats) servers.push(nats);
    if (redis) servers.push(redis);
    const natsSecured = auth !== undefined && nats !== undefined;
    const redisSecured = auth !== undefined && redis !== undefined && !redisHasUser;
    console.log(`NATS   ${config.natsUrl}${nats ? ` (started here${natsSecured ? `, secured: one nkey user per actor, streams in account "${auth.account}"` : ''}, data in ${join(DATA, 'nats')})` : ' (already running)'}`);
    console.log(`Redis  ${redactUrl(config.redisUrl)}${redis ? ` (started here${redisSecured ? ', secured: ACL users for the scheduler and supervisor' : ''}, data in ${join(DATA, 'redis')})` : ' (already running)'}`);
    if (natsSecured) console.log(`credentials in ${auth.dir}/ (triad auth init: one identity per actor)`);
    console.log(`namespace ${config.namespace}; actor logs in ${join(DATA, 'logs')}/`);
    const ports = await chooseServicePorts(process.env);
    console.log(`services  ${ports.summary}`);
    const httpBase = Number(process.env['TRIAD_HTTP_PORT']?.trim() || NaN);
    if (Number.isInteger(httpBase) && httpBase > 0) {
      console.log(`metrics and health: scheduler :${httpBase}, supervisor :${httpBase + 1}, agents :${httpBase + 2}${natsSecured ? `-${httpBase + 1 + LOCAL_AGENTS.length} (one per type)` : ''} (GET /metrics, /healthz, /readyz)`);
    }

    /** An identity's settings for a child process: its NATS seed if NATS was secured here, its Redis user if Redis was. */
    const identity = (name: string): Record<string, string> => {
      const e = auth?.env[name] ?? {};
      return {
        ...(natsSecured && e['NATS_NKEY_SEED'] ? { NATS_NKEY_SEED: e['NATS_NKEY_SEED'], ...(e['TRIAD_CLIENT_ID'] ? { TRIAD_CLIENT_ID: e['TRIAD_CLIENT_ID'] } : {}) } : {}),
        ...(redisSecured && e['REDIS_URL'] ? { REDIS_URL: e['REDIS_URL'] } : {}),
      };
    };
    // Under least privilege an agent identity serves one type and may not register workflows (this process does).
    const actors = natsSecured
      ? [
          ...ACTORS.filter((a) => a.name !== 'agents').map((a) => ({ ...a, env: identity(a.name) })),
          ...LOCAL_AGENTS.map((t, i) => ({ name: `agents-${t}`, script: ACTORS.find((a) => a.name === 'agents')?.script ?? '', httpOffset: 2 + i, env: { ...identity(`agent-${t}`), ORDERS_AGENTS: t, ORDERS_REGISTER_WORKFLOW: 'false' } })),
        ]
      : ACTORS.map((a) => ({ ...a, env: a.name === 'services' ? {} : identity(a.name) }));

    for (const a of actors) {
      const log = openSync(join(DATA, 'logs', `${a.name}.log`), 'a');
      const child = await spawnTracked(process.execPath, [join(ROOT, a.script)], { stdio: ['ignore', log, log], env: { ...actorEnv(a), ...ports.env, ...a.env } });
      void child.exit.then(({ code, signal }) => {
        if (!stopping) {
          const file = join(DATA, 'logs', `${a.name}.log`);
          console.error(`${a.name} exited (${signal ?? code}). The end of ${file}:\n${logTail(file)}\nStopping.`);
          void stop(1);
        }
      });
      children.push(child);
    }

    client = await TriadClient.connect(clientOptionsFromEnv({ ...process.env, ...identity('operator') }));
    // The scheduler answers registrations once it is up: retry for a bounded while.
    let registered: { version: number } | undefined;
    for (let i = 0; i < 60 && !registered; i++) {
      registered = await client.registerWorkflow(ordersWorkflow).catch(() => undefined);
      if (!registered) await new Promise((r) => setTimeout(r, 500));
    }
    if (!registered) throw new Error(`the scheduler did not answer within 30 s; see ${join(DATA, 'logs', 'scheduler.log')}`);
    console.log(`\nTriad is running: workflow orders v${registered.version} registered.\n`);
    printNextSteps(config.namespace, natsSecured);
    console.log('Fault knobs (restart with them set): PAYMENT_HANG_RATE=0.3 npm start (timeouts, retries, one charge per order),');
    console.log('  SHIPPING_FAIL_RATE=1 npm start (shipping gives up; the order is undone: refund, then release)\n');

    if (DEMO_INTERVAL_MS > 0) {
      console.log(`A demo order is submitted every ${DEMO_INTERVAL_MS} ms (TRIAD_DEMO_INTERVAL_MS=0 turns it off); its progress:\n`);
      let n = 0;
      const submitDemo = async (): Promise<void> => {
        if (!client || stopping) return;
        n++;
        const large = n === DEMO_LARGE_ORDER;
        const { taskId } = await client.submit('orders', { orderId: `demo-${n}`, amount: large ? DEMO_LARGE_AMOUNT : 10 + n, items: demoItems(n) });
        if (large) console.log(`${taskId.slice(0, 12)}  demo-${n} is a large order (amount ${DEMO_LARGE_AMOUNT}): its approval waits for the signal approved, which the demo sends ${DEMO_APPROVE_AFTER_MS / 1000} s after, as  npx triad signal ${taskId} approved  would`);
        const approve = (): void => {
          const timer = setTimeout(() => {
            if (!client || stopping) return;
            client
              .signal(taskId, 'approved', { approvedBy: 'npm start demo' })
              .then((r) => console.log(`${time(Date.now())}  ${taskId.slice(0, 12)}  signal approved sent (${r.outcome})`))
              .catch((e: unknown) => console.log(`${taskId}: the demo's approval was refused: ${errorMessage(e)}`));
          }, DEMO_APPROVE_AFTER_MS);
          timer.unref();
        };
        const onEvent = (e: TaskEvent): void => {
          console.log(describe(e));
          if (large && e.type === 'step_waiting' && e.step === 'approval') approve();
        };
        await client.wait(taskId, { timeoutMs: 120_000 + (large ? 120_000 : 0), onEvent }).catch((e: unknown) => console.log(`${taskId}: ${errorMessage(e)}`));
      };
      void submitDemo();
      demo = setInterval(() => void submitDemo().catch((e: unknown) => console.error(errorMessage(e))), DEMO_INTERVAL_MS);
    }
  } catch (e) {
    console.error(`triad: ${errorMessage(e)}`);
    await stop(1);
  }
}

void main();
