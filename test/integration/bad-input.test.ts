// Bad input gets a clear error and loses nothing: malformed bytes, wrong schema, oversized payloads and
// unknown workflows are dead-lettered with a reason (and the submitter told when it can be), while
// every other task keeps running. Two namespaces on one NATS and Redis never see each other.
import { readFileSync } from 'node:fs';
import { TriadClient, clientOptionsFromEnv } from '@triad/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ResultSender } from '@triad/agent';
import { ErrorCode, TriadError, encode, type StepResult } from '@triad/protocol';
import { startNats, startRedis, waitFor, withTeardown, type NatsServer, type RedisServer } from '../harness/index.js';
import { waitForDeadLetter } from '../support/dead-letters.js';
import { startTriad, type TestTriad } from '../support/triad.js';

const td = withTeardown(afterAll);
let nats: NatsServer;
let redis: RedisServer;
let triad: TestTriad;

beforeAll(async () => {
  [nats, redis] = await Promise.all([startNats({ teardown: td }), startRedis({ teardown: td })]);
  triad = await startTriad(td, { nats, redis });
});

describe('bad input', () => {
  it('dead-letters malformed bytes on the submit subject with the reason and the original bytes; other tasks run', async () => {
    const bus = triad.client.bus;
    const garbage = new Uint8Array([0xc1, 0xff, 0x00, 0x13]);
    await bus.js.publish(bus.names.subjects.submit(triad.client.clientId), garbage, { msgID: 'garbage-1' });
    const state = await triad.client.run('orders', { orderId: 'after-garbage', amount: 1 }, { timeoutMs: 30_000 });
    expect(state.status).toBe('completed');
    const dl = await waitForDeadLetter(triad.client.bus, (d) => d.source === 'submit' && d.original.length === garbage.length, 'the garbage dead letter');
    expect(dl.reason).toMatch(/not valid msgpack/);
    expect([...dl.original]).toEqual([...garbage]);
  });

  it('dead-letters a submission of the wrong schema and tells the submitter why on its reply subject', async () => {
    const bus = triad.client.bus;
    const reply = triad.client.replySubject();
    await bus.js.publish(bus.names.subjects.submit(triad.client.clientId), encode({ taskId: 'bad-schema-1', workflow: 42, replyTo: reply.subject }), { msgID: 'bad-schema-1' });
    const it = reply.events[Symbol.asyncIterator]();
    const first = await it.next();
    reply.close();
    expect(first.value).toMatchObject({ taskId: 'bad-schema-1', type: 'rejected' });
    expect((first.value as { reason: string }).reason).toMatch(/workflow/);
    const dl = await waitForDeadLetter(triad.client.bus, (d) => d.reason.includes('submission is invalid'), 'the wrong-schema dead letter');
    expect(dl.reason).toMatch(/submittedAt/);
  });

  it('dead-letters an oversized submission (over the message limit) with the reason', async () => {
    const bus = triad.client.bus;
    // Over Triad's 1,000,000-byte limit but under the stream's maximum, so only the scheduler can refuse it.
    const big = encode({ taskId: 'big-1', workflow: 'orders', input: 'x'.repeat(1_001_000), submittedAt: Date.now() }, 2_000_000);
    await bus.js.publish(bus.names.subjects.submit(triad.client.clientId), big, { msgID: 'big-1' });
    const dl = await waitForDeadLetter(triad.client.bus, (d) => d.source === 'submit' && d.reason.includes('over the limit'), 'the oversized dead letter');
    expect(dl.original.length).toBe(big.length);
    // The client sends an input above the inline threshold as an object (decision 0021 §4), and refuses
    // to even upload one above its TRIAD_MAX_OBJECT_BYTES.
    const small = await TriadClient.connect({ ...clientOptionsFromEnv(triad.env), maxObjectBytes: 1_000_000 });
    try {
      await expect(small.submit('orders', { blob: 'x'.repeat(1_100_000) })).rejects.toMatchObject({ code: ErrorCode.PayloadTooLarge, message: expect.stringMatching(/TRIAD_MAX_OBJECT_BYTES/) as unknown });
    } finally {
      await small.close();
    }
  });

  it('dead-letters malformed results, step requests and commands; the consumers move on', async () => {
    const bus = triad.client.bus;
    await bus.js.publish(bus.names.subjects.result('payment'), encode({ taskId: 'x', ok: 'maybe' }), { msgID: 'bad-result-1' });
    await bus.js.publish(bus.names.subjects.step('payment'), new Uint8Array([1, 2, 3]), { msgID: 'bad-step-1' });
    await bus.js.publish(bus.names.subjects.command, encode({ type: 'explode' }), { msgID: 'bad-cmd-1' });
    await waitForDeadLetter(triad.client.bus, (d) => d.source === 'result' && d.reason.includes('step result is invalid'), 'the bad result dead letter');
    await waitForDeadLetter(triad.client.bus, (d) => d.source === 'step.payment' && d.reason.includes('is not valid msgpack'), 'the bad step request dead letter');
    await waitForDeadLetter(triad.client.bus, (d) => d.source === 'command' && d.reason.includes('supervisor command is invalid'), 'the bad command dead letter');
    const state = await triad.client.run('orders', { orderId: 'after-bad-messages', amount: 3 }, { timeoutMs: 30_000 });
    expect(state.status).toBe('completed');
  });

  it('a batch of results from one publish: every valid result is applied, a malformed one is dead-lettered with its own bytes', async () => {
    const client = triad.client;
    // An agent that never connects: the test plays it, sending its results in one batch.
    await client.registerWorkflow({ name: 'ghosted', steps: [{ name: 'only', agent: 'ghost', budgetMs: 120_000 }] });
    const ids = await Promise.all(Array.from({ length: 12 }, async (_, i) => (await client.submit('ghosted', { i })).taskId));
    await waitFor(async () => ((await Promise.all(ids.map((id) => client.getTask(id)))).every((t) => t.steps[0]?.status === 'processing') ? true : undefined), {
      timeoutMs: 15_000,
      what: 'every ghosted step processing',
    });
    const sender = new ResultSender(client.bus, client.bus.names.subjects.result('ghost'));
    const junk = encode({ taskId: ids[0], ok: 'maybe' });
    const sent = ids.map((taskId, i) => {
      const r: StepResult = { taskId, step: 'only', kind: 'run', attempt: 1, agentId: 'test-ghost', finishedAt: Date.now(), tries: 1, ok: true, output: { doubled: i * 2 } };
      return sender.send(encode(r), `${taskId}:only:run:1:result`);
    });
    sent.push(sender.send(junk, 'junk'));
    await Promise.all(sent);
    // All sent in one turn: one JetStream publish carried them all.
    expect(sender.stats).toEqual({ publishes: 1, results: 13 });
    const done = await Promise.all(ids.map((id) => client.wait(id, { timeoutMs: 15_000 })));
    done.forEach((t, i) => {
      expect(t.status).toBe('completed');
      expect(t.steps[0]).toMatchObject({ status: 'processed', output: { doubled: i * 2 } });
    });
    const dl = await waitForDeadLetter(triad.client.bus, (d) => d.source === 'result' && d.reason.includes('step result 13 of a batch is invalid'), 'the malformed batch item');
    expect([...dl.original]).toEqual([...junk]);
  });

  it('rejects an unknown workflow with a clear error to the waiting submitter, and dead-letters it', async () => {
    const err = await triad.client.run('no-such-workflow', {}, { timeoutMs: 30_000 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(TriadError);
    expect((err as TriadError).code).toBe(ErrorCode.UnknownWorkflow);
    expect((err as TriadError).message).toMatch(/register it first/);
    await waitForDeadLetter(triad.client.bus, (d) => d.reason.includes('unknown workflow "no-such-workflow"'), 'the unknown-workflow dead letter');
  });

  it('refuses an invalid input for an agent as a permanent failure with the reason (the order is undone, nothing hangs)', async () => {
    const state = await triad.client.run('orders', { orderId: '', amount: -5 }, { timeoutMs: 30_000 });
    // The orders workflow undoes itself on failure; nothing completed, so nothing needed undoing.
    expect(state.status).toBe('compensated');
    // reserve and fraud run in parallel and both refuse the input: the first refusal begins the undo,
    // the other is then failed too or abandoned.
    const failed = state.steps.filter((s) => s.status === 'failed');
    expect(failed.length).toBeGreaterThanOrEqual(1);
    expect(failed[0]!.error).toMatch(/input for agent "(inventory|fraud)" is invalid/);
    expect(state.steps.filter((s) => ['reserve', 'fraud'].includes(s.name)).every((s) => ['failed', 'abandoned'].includes(s.status))).toBe(true);
    expect(state.steps.find((s) => s.name === 'charge')!.status).toBe('pending');
    expect(state.error).toMatch(/step (reserve|fraud) failed/);
  });

  it('refuses an invalid workflow definition listing every problem', async () => {
    const err = await triad.client
      .registerWorkflow({
        name: 'broken',
        steps: [
          { name: 'a', agent: 'x', dependsOn: ['ghost'] },
          { name: 'b', agent: 'x', dependsOn: ['c'], budgetMs: -1 },
          { name: 'c', agent: 'x', dependsOn: ['b'] },
        ],
      })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(TriadError);
    expect((err as TriadError).code).toBe(ErrorCode.InvalidDefinition);
    const details = (err as TriadError).details.join('\n');
    expect(details).toMatch(/budgetMs/);
    expect(details).toMatch(/depends on unknown step "ghost"/);
    expect(details).toMatch(/dependency cycle: (b -> c -> b|c -> b -> c)/);
  });

  // Decision 0019 §10: a kind of step is registered only once this scheduler can run it, so a half-built
  // kind never runs; every kind is built now (increment 7 added child steps), and registration checks
  // the other workflows a child step starts (§1.5): one not registered is a warning, a cycle a refusal.
  it('registers the 0019 example and child steps; warns of a child workflow not registered; refuses a cycle of child workflows', async () => {
    const example = JSON.parse(readFileSync(new URL('../../docs/decisions/0019-example.workflow.json', import.meta.url), 'utf8')) as Parameters<typeof triad.client.registerWorkflow>[0];
    expect((await triad.client.registerWorkflow(example)).version).toBeGreaterThanOrEqual(1);
    const lone = await triad.client.registerWorkflow({ name: 'parent', steps: [{ name: 'go', child: { workflow: 'nowhere' } }] });
    expect(lone.warnings).toEqual(['step "go" starts workflow "nowhere", which is not registered yet: the step fails when it starts until it is']);
    await triad.client.registerWorkflow({ name: 'loop-a', steps: [{ name: 'down', child: { workflow: 'loop-b' } }] });
    const cycle = await triad.client.registerWorkflow({ name: 'loop-b', steps: [{ name: 'up', child: { workflow: 'loop-a' } }] }).catch((e: unknown) => e);
    expect(cycle).toBeInstanceOf(TriadError);
    expect((cycle as TriadError).code).toBe(ErrorCode.InvalidDefinition);
    expect((cycle as TriadError).message).toBe('workflow "loop-b" cannot be registered: child workflows form a cycle: loop-b -> loop-a -> loop-b; a workflow may not start itself through its children');
    expect((await triad.client.listWorkflows()).map((w) => w.name)).not.toContain('loop-b');
  });
});

describe('namespaces', () => {
  it('keeps two namespaces on the same NATS and Redis apart', async () => {
    const other = await startTriad(td, { nats, redis }, { supervisor: false, registerOrders: false });
    // The other namespace has no orders workflow: a submission there is refused, not run by ours.
    const err = await other.client.run('orders', { orderId: 'ns', amount: 1 }, { timeoutMs: 30_000 }).catch((e: unknown) => e);
    expect((err as TriadError).code).toBe(ErrorCode.UnknownWorkflow);
    const reg = await other.client.registerWorkflow({ name: 'orders', steps: [{ name: 'reserve', agent: 'inventory' }, { name: 'audit', agent: 'auditor', dependsOn: ['reserve'] }] });
    // An agent that never connected is reported, not refused (agents may be deployed after workflows).
    expect(reg.warnings).toEqual([expect.stringMatching(/no agent "auditor" has connected/)]);
    await other.client.registerWorkflow({ name: 'orders', steps: [{ name: 'reserve', agent: 'inventory' }] });
    const there = await other.client.run('orders', { orderId: 'ns', amount: 1 }, { timeoutMs: 30_000 });
    expect(there.steps.map((s) => s.name)).toEqual(['reserve']);
    expect(await triad.client.getTask(there.taskId).catch((e: unknown) => (e as TriadError).code)).toBe(ErrorCode.UnknownTask);
    const ours = await triad.client.getWorkflow('orders');
    expect(ours.steps.map((s) => s.name)).toEqual(['reserve', 'fraud', 'approval', 'charge', 'ship']);
    expect(other.services.inventory.effects().every((e) => e.idempotencyKey.startsWith(`${other.namespace}/`))).toBe(true);
    expect(triad.services.inventory.effects().every((e) => e.idempotencyKey.startsWith(`${triad.namespace}/`))).toBe(true);
  });
});
