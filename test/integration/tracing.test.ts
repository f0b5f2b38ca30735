/**
 * One task is one trace across the bus (decision 0013): a scheduler, an agent host and a supervisor run
 * in this process against real NATS and Redis, with the OpenTelemetry SDK collecting spans in memory and
 * fetch instrumented. One task whose only step fails retryably on attempt 1 (so the supervisor retries
 * it) and succeeds on attempt 2 must give one tree: the client's submission span at the root, the
 * scheduler's receive under it, each step attempt with its agent, attempt and outcome, the handler's
 * remote call as the attempt's child, and the supervisor's retry (linked to the step) between the two
 * attempts.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { context, propagation, trace } from '@opentelemetry/api';
import { traceHeaders } from '@triad/telemetry';
import { registerInstrumentations } from '@opentelemetry/instrumentation';
import { UndiciInstrumentation } from '@opentelemetry/instrumentation-undici';
import { InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { NodeTracerProvider } from '@opentelemetry/sdk-trace-node';
import { AgentHost, ResultSender, RetryableError, defineAgent } from '@triad/agent';
import { connectBus, ensureStreams, type Bus } from '@triad/bus';
import { TriadClient } from '@triad/client';
import { workflow } from '@triad/core';
import { decodeResults, encode, type StepResult } from '@triad/protocol';
import { loadConfig } from '@triad/settings';
import { Scheduler } from '@triad/scheduler';
import { Leases, TaskStore, connectRedis } from '@triad/store';
import { Supervisor } from '@triad/supervisor';
import { startNats, startRedis, uniqueNamespace, waitFor, withTeardown, type NatsServer, type RedisServer } from '../harness/index.js';

const td = withTeardown(afterAll);
const exporter = new InMemorySpanExporter();
let nats: NatsServer;
let redis: RedisServer;
let remote: Server;
let remoteUrl: string;
let calls = 0;

beforeAll(async () => {
  const provider = new NodeTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
  provider.register(); // W3C trace context propagator and the AsyncLocalStorage context manager
  const unregister = registerInstrumentations({ tracerProvider: provider, instrumentations: [new UndiciInstrumentation()] });
  td.add(async () => {
    unregister();
    await provider.shutdown();
    trace.disable();
    context.disable();
    propagation.disable();
  });
  // The remote service: busy (503) on the first call, then fine.
  remote = createServer((_req, res) => {
    calls++;
    res.writeHead(calls === 1 ? 503 : 200, { 'content-type': 'application/json' }).end(JSON.stringify({ call: calls }));
  });
  await new Promise<void>((r) => remote.listen(0, '127.0.0.1', r));
  remoteUrl = `http://127.0.0.1:${(remote.address() as AddressInfo).port}/charge`;
  td.add(() => new Promise<void>((r) => remote.close(() => r())));
  [nats, redis] = await Promise.all([startNats({ teardown: td }), startRedis({ teardown: td })]);
});

const charge = defineAgent({
  name: 'tracedpay',
  async handler({ signal }) {
    const res = await fetch(remoteUrl, { method: 'POST', signal });
    if (res.status === 503) throw new RetryableError('the payment service is busy', { notApplied: true });
    return res.json();
  },
});

const traced = workflow('traced')
  .defaults({ retry: { maxAttempts: 1, initialDelayMs: 10, maxDelayMs: 10 }, ladder: { retries: 3, longBackoffMs: 1_000, maxFailures: 5 } })
  .step('charge', { agent: 'tracedpay', budgetMs: 5_000 });

function attr(s: ReadableSpan, key: string): unknown {
  return s.attributes[key];
}

describe('tracing', () => {
  it('one task with a retried step is one trace: submission → receive → attempt 1 (retryable) → supervisor retry → attempt 2 (ok), each attempt with its remote call', async () => {
    const namespace = uniqueNamespace('trace');
    const config = loadConfig({ NATS_URL: nats.url, REDIS_URL: redis.url, TRIAD_NAMESPACE: namespace });
    const connect = async (name: string): Promise<Bus> => {
      const bus = await connectBus({ ...config.nats, namespace, name });
      td.add(() => bus.close());
      return bus;
    };
    const redisConn = await connectRedis(config.redis);
    td.add(() => void redisConn.disconnect());
    const leaderRedis = await connectRedis(config.redis, { enableAutoPipelining: false });
    td.add(() => void leaderRedis.disconnect());
    const scheduler = new Scheduler({
      bus: await connect('trace-scheduler'),
      tasks: new TaskStore(redisConn, namespace),
      leases: new Leases(redisConn, namespace),
    });
    await scheduler.start();
    td.add(() => scheduler.stop());
    const host = new AgentHost({ bus: await connect('trace-agent'), agents: [charge] });
    await host.start();
    td.add(() => host.stop());
    await host.attached;
    const supervisor = new Supervisor({ bus: await connect('trace-supervisor'), tasks: new TaskStore(redisConn, namespace), leaderRedis, intervalMs: 100, leaseMs: 2_000 });
    await supervisor.start();
    td.add(() => supervisor.stop());
    const client = await TriadClient.connect({ natsUrl: nats.url, namespace });
    td.add(() => client.close());
    await client.registerWorkflow(traced);

    const state = await client.run('traced', { orderId: 't1' }, { timeoutMs: 30_000 });
    expect(state.status).toBe('completed');
    const taskId = state.taskId;

    // Spans end asynchronously after the result is applied: wait for the second attempt's apply.
    const spans = await waitFor(
      () => {
        const all = exporter.getFinishedSpans();
        const applies = all.filter((s) => s.name === 'triad.result.apply' && attr(s, 'triad.task_id') === taskId);
        return applies.length >= 2 ? all : undefined;
      },
      { timeoutMs: 10_000, what: 'the spans of both attempts and their results', lastSeen: () => exporter.getFinishedSpans().map((s) => s.name).join(', ') },
    );
    const byId = new Map(spans.map((s) => [s.spanContext().spanId, s]));
    const parentOf = (s: ReadableSpan): ReadableSpan | undefined => {
      const id = s.parentSpanContext?.spanId;
      return id ? byId.get(id) : undefined;
    };
    const ancestors = (s: ReadableSpan): string[] => {
      const out: string[] = [];
      for (let p = parentOf(s); p; p = parentOf(p)) out.push(p.name);
      return out;
    };

    const root = spans.find((s) => s.name === 'triad.submit traced' && attr(s, 'triad.task_id') === taskId);
    expect(root, 'the client made a submission span').toBeDefined();
    expect(root!.parentSpanContext, 'the submission is the root (no active span in the caller)').toBeUndefined();
    const traceId = root!.spanContext().traceId;
    const inTrace = spans.filter((s) => s.spanContext().traceId === traceId);

    const receive = inTrace.find((s) => s.name === 'triad.task.receive');
    expect(receive && parentOf(receive)?.name).toBe('triad.submit traced');

    const attempts = inTrace.filter((s) => s.name === 'triad.step tracedpay').sort((a, b) => Number(attr(a, 'triad.attempt')) - Number(attr(b, 'triad.attempt')));
    expect(
      attempts.map((s) => ({ attempt: attr(s, 'triad.attempt'), outcome: attr(s, 'triad.outcome'), agent: attr(s, 'triad.agent'), step: attr(s, 'triad.step') })),
      'both attempts are spans of the task trace',
    ).toEqual([
      { attempt: 1, outcome: 'retryable', agent: 'tracedpay', step: 'charge' },
      { attempt: 2, outcome: 'ok', agent: 'tracedpay', step: 'charge' },
    ]);
    const [first, second] = attempts as [ReadableSpan, ReadableSpan];
    expect(parentOf(first)?.name, 'attempt 1 was dispatched by the receive').toBe('triad.task.receive');
    // Attempt 2 descends from the supervisor's retry, itself in the task's trace and linked to the step.
    expect(ancestors(second)).toEqual(expect.arrayContaining(['triad.command.retry_step', 'triad.supervisor.retry', 'triad.submit traced']));
    const retry = inTrace.find((s) => s.name === 'triad.supervisor.retry');
    expect(retry, 'the supervisor retry span is in the task trace').toBeDefined();
    expect(attr(retry!, 'triad.step')).toBe('charge');
    expect(retry!.links.length, 'the retry links to the step it acts on').toBe(1);
    expect(retry!.links[0]!.context.traceId).toBe(traceId);
    expect(ancestors(retry!), 'the retry follows attempt 1 (its failed result)').toContain('triad.step tracedpay');

    // The handler's remote call is a child of each attempt (fetch instrumented by undici's diagnostics).
    for (const a of [first, second]) {
      const calls = inTrace.filter((s) => parentOf(s) === a && s.name.startsWith('POST'));
      expect(calls.length, `attempt ${String(attr(a, 'triad.attempt'))}: one remote call span under it`).toBe(1);
      expect(calls[0]!.attributes['http.response.status_code']).toBe(a === first ? 503 : 200);
    }
    // Every span of the task is in this one trace.
    const taskSpans = spans.filter((s) => attr(s, 'triad.task_id') === taskId);
    expect(new Set(taskSpans.map((s) => s.spanContext().traceId))).toEqual(new Set([traceId]));
  }, 60_000);

  it("results sent as one batch each carry their own attempt's trace context (the batch's traceparents)", async () => {
    const namespace = uniqueNamespace('tracebatch');
    const bus = await connectBus({ ...loadConfig({ NATS_URL: nats.url, TRIAD_NAMESPACE: namespace }).nats, namespace, name: 'trace-batch' });
    td.add(() => bus.close());
    await ensureStreams(bus);
    const subject = bus.names.subjects.result('tracedpay');
    const seen: Uint8Array[] = [];
    const sub = bus.nc.subscribe(subject, { callback: (_e, m) => void seen.push(m.data) });
    td.add(() => sub.unsubscribe());
    const sender = new ResultSender(bus, subject);
    const tracer = trace.getTracer('batch-test');
    const result = (taskId: string): StepResult => ({ taskId, step: 'charge', kind: 'run', attempt: 1, ok: true, output: {}, agentId: 'a-1', finishedAt: Date.now(), tries: 1 });
    // Three results finishing in one turn, each inside its own attempt span: they leave as one batch.
    const spansOut = ['t-1', 't-2', 't-3'].map((id) => tracer.startSpan(`attempt ${id}`));
    const sent = spansOut.map((span, i) => context.with(trace.setSpan(context.active(), span), () => sender.send(encode(result(`t-${i + 1}`)), `t-${i + 1}:charge:run:1:result`, traceHeaders())));
    await Promise.all(sent);
    for (const span of spansOut) span.end();
    await waitFor(() => seen.length > 0 || undefined, { timeoutMs: 5_000, what: 'the batch on the results subject' });
    expect(seen, 'one message for the three results').toHaveLength(1);
    const d = decodeResults(seen[0]!);
    expect(d.ok && d.value.single).toBe(false);
    const items = d.ok ? d.value.items : [];
    expect(items.map((i) => i.ok && i.value.taskId)).toEqual(['t-1', 't-2', 't-3']);
    expect(items.map((i) => i.traceparent?.split('-')[1])).toEqual(spansOut.map((s) => s.spanContext().traceId));
    expect(items.map((i) => i.traceparent?.split('-')[2])).toEqual(spansOut.map((s) => s.spanContext().spanId));
  });
});
