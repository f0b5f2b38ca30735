// The protocol is a public contract: the example runs with its fraud step served by the Go agent of
// examples/go (written from docs/protocol.md alone) and orders submitted by the Go client too — also when
// the Go agent is killed mid-step, each effect applied once per idempotency key. The Go programs connect
// as the identities `triad auth init` writes (decisions 0016, 0022: the fraud agent in the namespace's NATS
// account, the client in an account of its own), so their credentials, inbox prefixes and what their
// accounts import are checked by a real nats-server.
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { objectBucket, unpackTrusted } from '@triad/protocol';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { triadAccountName } from '@triad/permissions';
import { startNats, startProcess, startRedis, uniqueNamespace, waitFor, withTeardown, type ActorProcess, type NatsServer, type RedisServer } from '../harness/index.js';
import { buildGoExamples, type GoExamples } from '../support/go.js';
import { cli, effectCounts, startTriad, ROOT, SCRIPTS, type TestTriad } from '../support/triad.js';
import { waitForCall } from '../support/waits.js';

const td = withTeardown(afterAll);
let nats: NatsServer;
let redis: RedisServer;
let go: GoExamples;
let t: TestTriad;
const goAgents: ActorProcess[] = [];
const ns = uniqueNamespace('go');
const GO_CLIENT = 'goweb';
/** The Go programs' environments: the test's settings with their own identity instead of the actors' user. */
let goAgentEnv: Record<string, string>;
let goClientEnv: Record<string, string>;

beforeAll(async () => {
  const dir = await mkdtemp(join(tmpdir(), 'triad-go-ids-'));
  await promisify(execFile)(process.execPath, [SCRIPTS.cli, 'auth', 'init', '--dir', dir, '--namespace', ns, '--agents', 'fraud', '--clients', GO_CLIENT], { cwd: ROOT });
  const seedOf = async (identity: string): Promise<string> => /^NATS_NKEY_SEED=(.+)$/m.exec(await readFile(join(dir, `${identity}.env`), 'utf8'))?.[1] ?? '';
  const [agentSeed, clientSeed] = await Promise.all([seedOf('agent-fraud'), seedOf(`client-${GO_CLIENT}`)]);
  // auth init's accounts, plus one unrestricted user in the namespace's account for the TypeScript actors
  // and the test's own client (least-privilege.test.ts runs those on their identities).
  const triadAccount = `${JSON.stringify(triadAccountName(ns))} {\n    jetstream: enabled\n    users = [`;
  const accounts = await readFile(join(dir, 'nats-accounts.conf'), 'utf8');
  expect(accounts).toContain(triadAccount);
  const config = `accounts {\n${accounts.replace(triadAccount, `${triadAccount}\n      { user: actors, password: "actors-secret" }`)}\n}`;
  // The Go packages are installed when missing (minutes on a fresh machine), then the examples built.
  [go, nats, redis] = await Promise.all([buildGoExamples(td), startNats({ teardown: td, config }), startRedis({ teardown: td })]);
  // The example's agent host serves every agent type but fraud: that one is the Go agent's.
  t = await startTriad(td, { nats, redis }, { namespace: ns, env: { ORDERS_AGENTS: 'inventory,payment,shipping', NATS_USER: 'actors', NATS_PASSWORD: 'actors-secret' } });
  const { NATS_USER: _u, NATS_PASSWORD: _p, ...base } = t.env;
  goAgentEnv = { ...base, NATS_NKEY_SEED: agentSeed };
  goClientEnv = { ...base, NATS_NKEY_SEED: clientSeed, TRIAD_CLIENT_ID: GO_CLIENT };
  await startGoAgent();
}, 900_000);

async function startGoAgent(): Promise<ActorProcess> {
  const p = await startProcess({ name: `go-agent-${goAgents.length + 1}`, command: go.agent, args: ['-agent', 'fraud'], env: goAgentEnv, cwd: ROOT, readyPattern: /go agent ready/, teardown: td });
  goAgents.push(p);
  return p;
}

/** Runs the Go client; resolves with its exit code and output (never rejects). */
function goClient(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(go.client, ['-timeout', '45s', ...args], { env: { ...process.env, ...goClientEnv }, timeout: 60_000 }, (error, stdout, stderr) => {
      resolve({ code: error ? (typeof error.code === 'number' ? error.code : 1) : 0, stdout, stderr });
    });
  });
}

const fraudKey = (taskId: string): string => `${t.namespace}/${taskId}/fraud`;

describe('large payloads in Go (decision 0021 §4.8)', () => {
  it('the Go client uploads a 20 MB input file through the schedulers, the Go fraud agent reads it, and the Go client downloads the 20 MB label', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'triad-go-big-'));
    const document = 'g'.repeat(20_000_000);
    const file = join(dir, 'order.json');
    await writeFile(file, JSON.stringify({ orderId: 'go-big', amount: 7, document, labelBytes: 20_000_000 }));
    const run = await goClient(['-task-id', 'go-big-1', '-input-file', file, '-output-dir', join(dir, 'out')]);
    expect(run.code, `the Go client's output:\n${run.stdout}${run.stderr}`).toBe(0);
    expect(run.stdout).toMatch(/^task go-big-1 completed$/m);
    // The task's input is a reference into the Go client's bucket; the Go agent resolved it to screen the order.
    const state = await t.client.getTask('go-big-1');
    expect(state.input).toMatchObject({ $triad: 'object', bucket: objectBucket(ns, GO_CLIENT), size: expect.any(Number) as unknown });
    expect(t.services.fraud.effects().find((e) => e.idempotencyKey === fraudKey('go-big-1'))).toMatchObject({ payload: { orderId: 'go-big', amount: 7 } });
    expect(t.services.inventory.effects().find((e) => e.idempotencyKey === `${t.namespace}/go-big-1/reserve`)?.document?.bytes).toBe(20_000_000);
    // The shipping label (stored as an object by the TypeScript agent) came back to the Go client whole.
    expect(run.stdout).toMatch(/^output of step ship#0: \d+ bytes/m);
    const label = unpackTrusted(await readFile(join(dir, 'out', 'ship#0.msgpack'))) as { label: string };
    expect(label.label.length).toBe(20_000_000);
  }, 120_000);
});

describe('the example with the Go agent serving fraud', () => {
  it('completes orders submitted by the TypeScript client and by the Go client; fraud ran at the Go agent, once per key', async () => {
    const states = await Promise.all(['ts-1', 'ts-2', 'ts-3'].map((orderId, i) => t.client.run('orders', { orderId, amount: 10 + i }, { timeoutMs: 45_000 })));
    const run = await goClient(['-task-id', 'go-order-1', '-order-id', 'go-1', '-amount', '42']);
    expect(run.code, `the Go client's output:\n${run.stdout}${run.stderr}`).toBe(0);
    // It printed the events in order, the fraud step among them, and the end.
    expect(run.stdout).toMatch(/^event 1 received/m);
    expect(run.stdout).toMatch(/^event \d+ step_done step=fraud attempt=\d+/m);
    // It read the stored events (task.events) as well as its reply and event subjects.
    expect(run.stderr).not.toMatch(/not reading the stored events/);
    // Its task.get at the end went through, on its own client-scoped subject (decision 0017).
    expect(run.stderr).not.toMatch(/task\.get/);
    expect(run.stdout).toMatch(/^task go-order-1 completed$/m);
    // Submitted again, the same task id is dropped as a duplicate: the client reads the task's whole
    // story from its stored events alone (nothing comes on its new reply subject) and ends the same way.
    const again = await goClient(['-task-id', 'go-order-1', '-order-id', 'go-1', '-amount', '42']);
    expect(again.code, `the Go client's output:\n${again.stdout}${again.stderr}`).toBe(0);
    expect(again.stdout).toMatch(/^event 1 received/m);
    expect(again.stdout).toMatch(/^task go-order-1 completed$/m);
    // Its history lost (events go without PubAck: a NATS failover can drop some), the client still ends:
    // it reads the task's state now and then (protocol §5).
    await t.client.bus.jsm.streams.purge(t.client.bus.names.streams.events, { filter: t.client.bus.names.subjects.event(GO_CLIENT, 'go-order-1') });
    const lost = await goClient(['-task-id', 'go-order-1', '-order-id', 'go-1', '-amount', '42']);
    expect(lost.code, `the Go client's output:\n${lost.stdout}${lost.stderr}`).toBe(0);
    expect(lost.stdout).not.toMatch(/^event /m);
    expect(lost.stdout).toMatch(/^task go-order-1 completed$/m);
    expect(lost.stderr).toMatch(/task go-order-1 ended \(seq \d+\) with events up to 0 shown: the rest were lost/);
    states.push(await t.client.getTask('go-order-1'));
    for (const s of states) {
      expect(s.status, s.taskId).toBe('completed');
      const fraud = s.steps.find((x) => x.name === 'fraud')!;
      // The result's agentId names the Go process: the step's lockedBy.
      expect(fraud.lockedBy, s.taskId).toMatch(/^go-fraud-/);
      expect(fraud.output, s.taskId).toMatchObject({ ref: expect.stringMatching(/^fraud_/) as unknown });
      expect(effectCounts(t.services.fraud).get(fraudKey(s.taskId)), s.taskId).toBe(1);
    }
    const screened = t.services.fraud.effects().find((e) => e.idempotencyKey === fraudKey('go-order-1'));
    expect(screened).toMatchObject({ action: 'screen', payload: { orderId: 'go-1', amount: 42 } });
  });

  it('the Go agent answers a probe under its least-privilege identity (decision 0021 §3.3): triad status names the Go instance holding the fraud step', async () => {
    t.services.fraud.setFaults({ hangRate: 1 });
    try {
      const { taskId } = await t.client.submit('orders', { orderId: 'go-probe', amount: 10 });
      await waitFor(() => (t.services.fraud.waiting().some((w) => w.idempotencyKey === fraudKey(taskId)) ? true : undefined), { timeoutMs: 20_000, what: 'fraud to call its service' });
      const r = await cli(t, ['status', taskId]);
      expect(r.code, r.stderr).toBe(0);
      expect(r.stdout.split('\n').find((l) => l.startsWith('fraud '))).toMatch(/in flight at go-fraud-\S+ \(try 1, since \d\d:\d\d:\d\d\) until complete-by/);
    } finally {
      t.services.fraud.setFaults({ hangRate: 0 });
    }
  });

  it('the Go agent runs a fan-out step (decision 0019 §8.3): one call per element under its own key, its index echoed, the outputs in order', async () => {
    await t.client.registerWorkflow({ name: 'go-fanout', steps: [{ name: 'screen-each', agent: 'fraud', budgetMs: 5_000, forEach: 'items', maxParallel: 2 }] });
    const items = [{ sku: 'a' }, 'b', 3];
    const state = await t.client.run('go-fanout', { orderId: 'go-fan', amount: 5, items }, { timeoutMs: 45_000 });
    expect(state.status).toBe('completed');
    const step = state.steps[0]!;
    const output = step.output as { ref: string }[];
    expect(output).toHaveLength(3);
    for (const o of output) expect(o.ref).toMatch(/^fraud_/);
    const keyOf = (i: number): string => `${t.namespace}/${state.taskId}/screen-each/${i}`;
    const effects = new Map(t.services.fraud.effects().map((e) => [e.idempotencyKey, e]));
    items.forEach((item, i) => {
      expect(effects.get(keyOf(i)), `element ${i}`).toMatchObject({ applied: true, calls: 1, payload: { orderId: 'go-fan', amount: 5, item, index: i } });
      // The outputs are in index order: element i's output is the result the service gave its key.
      expect(output[i]).toEqual(effects.get(keyOf(i))!.result);
    });
  });

  it('the Go client exits non-zero with the reason when its submission is rejected', async () => {
    const r = await goClient(['-workflow', 'no-such-workflow', '-task-id', 'go-rejected-1']);
    expect(r.code, r.stdout + r.stderr).not.toBe(0);
    expect(r.stdout).toMatch(/^event 0 rejected/m);
    expect(r.stderr).toMatch(/task go-rejected-1 was rejected: UNKNOWN_WORKFLOW/);
  });

  it('the Go client signals its own task when a step waits for the signal (decision 0019, protocol §6 task.signal)', async () => {
    await t.client.registerWorkflow({ name: 'go-approval', steps: [{ name: 'approval', waitFor: { signal: 'approved', timeoutMs: 60_000 } }] });
    const r = await goClient(['-workflow', 'go-approval', '-task-id', 'go-approve-1', '-input', '{}', '-signal', 'approved', '-signal-data', '{"by":"go"}']);
    expect(r.code, r.stdout + r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^event \d+ step_waiting step=approval/m);
    expect(r.stdout).toMatch(/^signal approved delivered \(step approval waited for it\)$/m);
    expect(r.stdout).toMatch(/^task go-approve-1 completed$/m);
    const state = await t.client.getTask('go-approve-1');
    expect(state.steps[0]).toMatchObject({ status: 'processed', output: { by: 'go' } });
  });

  it('a Go agent killed (SIGKILL) mid-step: another Go agent completes the step, the effect applied once', async () => {
    // The screening takes 2 s: the first Go agent is surely mid-call when it is killed.
    t.services.fraud.setFaults({ latencyMs: 2_000 });
    const { taskId } = await t.client.submit('orders', { orderId: 'go-kill-1', amount: 7 });
    const midStep = await waitForCall(t, taskId, 'fraud');
    expect(goAgents).toHaveLength(1);
    await goAgents[0]!.kill('SIGKILL');
    t.services.fraud.setFaults({ latencyMs: 0 });
    const second = await startGoAgent();
    const state = await t.client.wait(taskId, { timeoutMs: 45_000 });
    expect(state.status).toBe('completed');
    const fraud = state.steps.find((s) => s.name === 'fraud')!;
    // The agent that reported it is the second one (its agentId ends with its pid).
    expect(fraud.lockedBy).toMatch(new RegExp(`^go-fraud-.*-${second.pid}$`));
    expect(fraud.attempt).toBeGreaterThanOrEqual(midStep.attempt);
    expect(effectCounts(t.services.fraud).get(fraudKey(taskId))).toBe(1);
    // And SIGTERM stops a Go agent gracefully.
    await second.stop();
    expect(await second.exited).toBe(0);
    expect(second.output()).toMatch(/agent go-fraud-.* stopped/);
  });
});
