// The protocol is a public contract: the example runs with its fraud step served by the Go agent of
// examples/go (written from docs/protocol.md alone) and orders submitted by the Go client too — also when
// the Go agent is killed mid-step, each effect applied once per idempotency key. The Go programs connect
// as least-privilege identities (decision 0016: an nkey agent identity for fraud, a client identity), so
// their credentials and inbox prefixes are checked by a real nats-server's permissions.
import { execFile } from 'node:child_process';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { agentIdentity, clientIdentity, type Identity } from '@triad/protocol';
import { startNats, startProcess, startRedis, uniqueNamespace, withTeardown, type ActorProcess, type NatsServer, type RedisServer } from '../harness/index.js';
import { buildGoExamples, type GoExamples } from '../support/go.js';
import { nkeyUser } from '../support/nats-identities.js';
import { effectCounts, startTriad, ROOT, type TestTriad } from '../support/triad.js';
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

/** One nats-server user: an nkey with the identity's permissions, as `triad auth init` writes it. */
function nkeyUserConfig(publicKey: string, id: Identity): string {
  const list = (xs: string[]): string => `[${xs.map((x) => JSON.stringify(x)).join(', ')}]`;
  return `{ nkey: ${publicKey}, permissions: { publish: { allow: ${list(id.nats.publish)} }, subscribe: { allow: ${list(id.nats.subscribe)} } } }`;
}

beforeAll(async () => {
  const agentUser = nkeyUser();
  const clientUser = nkeyUser();
  const dir = await mkdtemp(join(tmpdir(), 'triad-go-ids-'));
  const [agentSeed, clientSeed] = [join(dir, 'agent-fraud.nk'), join(dir, `client-${GO_CLIENT}.nk`)];
  await Promise.all([writeFile(agentSeed, agentUser.seed, { mode: 0o600 }), writeFile(clientSeed, clientUser.seed, { mode: 0o600 })]);
  const users = [
    // The TypeScript actors and the test's own client: no restrictions (least-privilege.test.ts covers them).
    '{ user: actors, password: "actors-secret" }',
    nkeyUserConfig(agentUser.publicKey, agentIdentity(ns, 'fraud')),
    nkeyUserConfig(clientUser.publicKey, clientIdentity(ns, GO_CLIENT)),
  ];
  // The Go packages are installed when missing (minutes on a fresh machine), then the examples built.
  [go, nats, redis] = await Promise.all([
    buildGoExamples(td),
    startNats({ teardown: td, config: `authorization {\n  users = [\n    ${users.join('\n    ')}\n  ]\n}` }),
    startRedis({ teardown: td }),
  ]);
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

describe('the example with the Go agent serving fraud', () => {
  it('completes orders submitted by the TypeScript client and by the Go client; fraud ran at the Go agent, once per key', async () => {
    const states = await Promise.all(['ts-1', 'ts-2', 'ts-3'].map((orderId, i) => t.client.run('orders', { orderId, amount: 10 + i }, { timeoutMs: 45_000 })));
    const run = await goClient(['-task-id', 'go-order-1', '-order-id', 'go-1', '-amount', '42']);
    expect(run.code, `the Go client's output:\n${run.stdout}${run.stderr}`).toBe(0);
    // It printed the events in order, the fraud step among them, and the end.
    expect(run.stdout).toMatch(/^event 1 received/m);
    expect(run.stdout).toMatch(/^event \d+ step_done step=fraud attempt=\d+/m);
    // It read the EVENTS stream as well as its reply subject.
    expect(run.stderr).not.toMatch(/not reading the EVENTS stream/);
    // Its task.get at the end went through, on its own client-scoped subject (decision 0017).
    expect(run.stderr).not.toMatch(/task\.get/);
    expect(run.stdout).toMatch(/^task go-order-1 completed$/m);
    // Submitted again, the same task id is dropped as a duplicate: the client reads the task's whole
    // story from the EVENTS stream alone (nothing comes on its new reply subject) and ends the same way.
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

  it('the Go client exits non-zero with the reason when its submission is rejected', async () => {
    const r = await goClient(['-workflow', 'no-such-workflow', '-task-id', 'go-rejected-1']);
    expect(r.code, r.stdout + r.stderr).not.toBe(0);
    expect(r.stdout).toMatch(/^event 0 rejected/m);
    expect(r.stderr).toMatch(/task go-rejected-1 was rejected: UNKNOWN_WORKFLOW/);
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
