#!/usr/bin/env node
// Measures recovery times on real processes (docs/failure-model.md quotes its output):
//   node scripts/measure-recovery.mjs        (after npm run build; uses the compiled test harness)
// Each figure is one run's samples on this machine; nothing here is asserted.
import { startNats, startRedis, Teardown, sleep, waitFor } from '../test/dist/harness/index.js';
import { startTriad } from '../test/dist/support/triad.js';
import { ordersWorkflow } from '@triad/example-orders';

const td = new Teardown();
const BUDGET = 2_000, INTERVAL = 500, LEASE = 2_000;
const out = (k, v) => console.log(`${k.padEnd(58)} ${v}`);
try {
  const [nats, redis] = await Promise.all([startNats({ teardown: td }), startRedis({ teardown: td })]);
  const t = await startTriad(td, { nats, redis }, { registerOrders: false, schedulers: 2, supervisor: { intervalMs: INTERVAL, leaseMs: LEASE } });
  await t.startSupervisor({ intervalMs: INTERVAL, leaseMs: LEASE });
  const wf = { ...ordersWorkflow.toJSON(), name: 'orders-rec', defaults: { retry: { maxAttempts: 1, initialDelayMs: 1, maxDelayMs: 1 }, ladder: { retries: 5, longBackoffMs: 500, maxFailures: 8 } } };
  wf.steps = wf.steps.map((s) => ({ ...s, budgetMs: BUDGET }));
  await t.client.registerWorkflow(wf);
  console.log(`step budget ${BUDGET} ms, supervisor interval ${INTERVAL} ms, leadership lease ${LEASE} ms\n`);

  // 1. Agent killed mid-step: from the kill to the step done on its retry, and from the step's start.
  const agentSamples = [];
  for (let i = 0; i < 5; i++) {
    t.services.payment.setFaults({ latencyMs: 60_000 });
    const { taskId } = await t.client.submit('orders-rec', { orderId: `rec-${i}`, amount: 1 });
    const started = await waitFor(async () => {
      const s = (await t.client.getTask(taskId)).steps.find((x) => x.name === 'charge');
      return s.status === 'processing' && s.lockedBy ? s : undefined;
    }, { timeoutMs: 10_000, intervalMs: 10, what: 'charge to start' });
    const victim = t.agents.shift();
    const killedAt = Date.now();
    await victim.kill('SIGKILL');
    t.services.payment.setFaults({ latencyMs: 0 });
    await t.startAgents();
    const done = await t.client.wait(taskId, { timeoutMs: 30_000 });
    const charge = done.steps.find((x) => x.name === 'charge');
    agentSamples.push({ fromKill: charge.finishedAt - killedAt, fromStart: charge.finishedAt - started.startedAt, attempt: charge.attempt });
  }
  const bound = BUDGET + INTERVAL + LEASE;
  out('agent killed mid-step: step done after kill (ms)', agentSamples.map((s) => s.fromKill).join(', '));
  out('  ... after the step started (ms) [bound budget+interval+lease]', `${agentSamples.map((s) => s.fromStart).join(', ')} [${bound}]`);

  // 2. Supervisor leader killed: time until another leads (epoch + 1).
  const leaderKey = `triad:${t.namespace}:supervisor:leader`;
  const failovers = [];
  for (let i = 0; i < 3; i++) {
    const [id, epoch] = (await waitFor(() => t.redis.get(leaderKey), { timeoutMs: 10_000, what: 'a leader' })).split('|');
    const victim = t.supervisors.find((p) => p.output().includes(id));
    const killedAt = Date.now();
    await victim.kill('SIGKILL');
    t.supervisors.splice(t.supervisors.indexOf(victim), 1);
    const next = await waitFor(async () => {
      const v = await t.redis.get(leaderKey);
      return v && !v.startsWith(`${id}|`) ? v : undefined;
    }, { timeoutMs: 15_000, intervalMs: 10, what: 'a new leader' });
    failovers.push(`${Date.now() - killedAt} (epoch ${epoch}→${next.split('|')[1]})`);
    await t.startSupervisor({ intervalMs: INTERVAL, leaseMs: LEASE });
  }
  out(`supervisor leader killed: new leader after (ms) [lease ${LEASE}]`, failovers.join(', '));

  // 3. A scheduler killed with 100 tasks in flight: time until all complete.
  t.services.payment.setFaults({ latencyMs: 20 });
  let ids = await Promise.all(Array.from({ length: 100 }, (_, i) => t.client.submit('orders-rec', { orderId: `s-${i}`, amount: 1 }).then((r) => r.taskId)));
  await sleep(100);
  let at = Date.now();
  await t.schedulers[0].kill('SIGKILL');
  let states = await Promise.all(ids.map((id) => t.client.wait(id, { timeoutMs: 60_000 })));
  out('scheduler killed, 100 tasks in flight: all completed after (ms)', `${Date.now() - at} (${states.filter((s) => s.status === 'completed').length}/100 completed)`);

  // 4. NATS and Redis restarted (data kept), 100 tasks in flight each time.
  for (const [name, server] of [['NATS', nats], ['Redis', redis]]) {
    ids = await Promise.all(Array.from({ length: 100 }, (_, i) => t.client.submit('orders-rec', { orderId: `${name}-${i}`, amount: 1 }).then((r) => r.taskId)));
    await sleep(100);
    await server.kill();
    at = Date.now();
    await server.restart();
    const up = Date.now() - at;
    states = await Promise.all(ids.map((id) => t.client.wait(id, { timeoutMs: 120_000 })));
    out(`${name} killed and restarted, 100 tasks in flight: all completed after (ms)`, `${Date.now() - at} (server back after ${up}; ${states.filter((s) => s.status === 'completed').length}/100 completed)`);
  }
} finally {
  await td.run().catch((e) => console.error(e));
}
