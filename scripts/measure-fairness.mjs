#!/usr/bin/env node
// Measures fair intake (decision 0022, docs/security.md quotes its output) on a deployment secured by
// `triad auth init` — clients alice and bob in NATS accounts of their own, one identity and one process
// per agent type, the example's orders workflow:
//   node scripts/measure-fairness.mjs [--flood 3000] [--rate 20] [--active N]      (after npm run build)
// bob's order alone, then while alice submits --flood orders at once: with no limit (admission's default
// cap of active tasks per client, decision 0024; `--active N` sets TRIAD_CLIENT_ACTIVE_TASKS, 0 = off, as
// before 0024), and with the operator holding alice to --rate submissions a second (`triad intake set
// alice --rate N`). Each figure is one run on this machine; nothing here is asserted.
import { parseArgs } from 'node:util';
import { TriadClient, clientOptionsFromEnv } from '@triad/client';
import { ordersWorkflow } from '@triad/example-orders';
import { Teardown, uniqueNamespace, waitFor } from '../test/dist/harness/index.js';
import { startSecured } from '../test/dist/support/secured.js';
import { startTriad } from '../test/dist/support/triad.js';

const { values: o } = parseArgs({ options: { flood: { type: 'string', default: '3000' }, rate: { type: 'string', default: '20' }, active: { type: 'string', default: '' } } });
const FLOOD = Number(o.flood);
const RATE = Number(o.rate);
const AGENTS = ['inventory', 'fraud', 'payment', 'shipping'];
const out = (k, v) => console.log(`${k.padEnd(64)} ${v}`);
const td = new Teardown();

try {
  const ns = uniqueNamespace('fair');
  const secured = await startSecured(td, [{ namespace: ns, agents: AGENTS, clients: ['alice', 'bob'] }]);
  const env = (identity) => secured.env(ns, identity);
  const t = await startTriad(
    td,
    { nats: secured.nats, redis: { url: secured.adminRedisUrl } },
    { namespace: ns, agentProcesses: 0, registerOrders: false, env: { TRIAD_LOG_LEVEL: 'warn', ...(o.active !== '' ? { TRIAD_CLIENT_ACTIVE_TASKS: o.active } : {}) }, roleEnv: { scheduler: await env('scheduler'), supervisor: await env('supervisor'), client: await env('operator') } },
  );
  for (const a of AGENTS) await t.startAgents({ ...(await env(`agent-${a}`)), ORDERS_AGENTS: a });
  await t.client.registerWorkflow(ordersWorkflow);
  const connect = async (identity) => {
    const c = await TriadClient.connect({ ...clientOptionsFromEnv(await env(identity)), requestTimeoutMs: 30_000, backlogWaitMs: 600_000 });
    td.add(() => c.close());
    return c;
  };
  const [alice, bob] = await Promise.all([connect('client-alice'), connect('client-bob')]);

  /** bob's order, submit → completed, and submit → received (the intake leg). */
  const bobsOrder = async (label) => {
    const t0 = performance.now();
    let received;
    const s = await bob.run('orders', { orderId: `bob-${label}`, amount: 5 }, { timeoutMs: 300_000, onEvent: (e) => (e.type === 'received' ? (received ??= performance.now() - t0) : undefined) });
    return { ms: Math.round(performance.now() - t0), receivedMs: Math.round(received ?? Number.NaN), status: s.status };
  };
  /** alice submits FLOOD orders at once (the SDK waits while her backlog is full); resolves when all are stored. */
  const flood = (tag) => {
    const started = performance.now();
    const stored = Promise.all(Array.from({ length: FLOOD }, (_, i) => alice.submit('orders', { orderId: `${tag}-${i}`, amount: 1 }, { taskId: `${tag}-${i}` }))).then(() => Math.round(performance.now() - started));
    return { stored };
  };
  /** Waits until alice's flood has ended (every task of it completed), so the next scenario starts idle. */
  const drained = (tag) =>
    waitFor(async () => ((await alice.listTasks({ limit: FLOOD + 100, status: 'completed' })).filter((x) => x.taskId.startsWith(`${tag}-`)).length >= FLOOD ? true : undefined), {
      timeoutMs: 900_000,
      intervalMs: 2_000,
      what: `alice's ${FLOOD} orders (${tag}) to complete`,
    });

  await bobsOrder('warm-up');
  const alone = [];
  for (let i = 0; i < 5; i++) alone.push((await bobsOrder(`alone-${i}`)).ms);
  out('bob alone: order completed after (ms, 5 runs)', alone.join(', '));

  // No limit: the backlog cap bounds intake, the agents' queues are first come first served.
  const a = flood('free');
  await waitFor(async () => ((await alice.listTasks({ limit: 200 })).length >= 100 ? true : undefined), { timeoutMs: 60_000, what: 'alice to have 100 orders taken' });
  const free = await bobsOrder('free');
  out(`while alice submits ${FLOOD}, no limit (active cap ${o.active === '' ? 'default' : o.active}): bob's order completed after (ms)`, `${free.ms} (${free.status}; taken after ${free.receivedMs} ms)`);
  out('  alice: all stored after (ms)', await a.stored);
  await drained('free');

  // The operator holds alice to RATE submissions a second.
  await t.client.setIntakeLimit('alice', { ratePerSecond: RATE, burst: RATE });
  const b = flood('limited');
  // Not awaited: most of them are still waiting their turn when the run ends (and the client closes).
  b.stored.catch(() => undefined);
  await waitFor(async () => ((await alice.listTasks({ limit: 200 })).filter((x) => x.taskId.startsWith('limited-')).length >= 2 * RATE ? true : undefined), {
    timeoutMs: 60_000,
    what: 'alice to have orders taken under her limit',
  });
  const limited = await bobsOrder('limited');
  const takenBefore = (await alice.listTasks({ limit: FLOOD + 100 })).filter((x) => x.taskId.startsWith('limited-')).length;
  out(`while alice submits ${FLOOD}, alice limited to ${RATE}/s: bob's order completed after (ms)`, `${limited.ms} (${limited.status}; taken after ${limited.receivedMs} ms)`);
  out('  alice: orders taken when bob\'s completed', `${takenBefore} of ${FLOOD}`);
  await t.client.clearIntakeLimit('alice');
} finally {
  await td.run();
}
