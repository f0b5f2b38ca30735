/**
 * The apps configure tracing from the standard OTEL_* variables (decision 0013): a scheduler, a
 * supervisor and the order agents run as processes with OTEL_EXPORTER_OTLP_ENDPOINT pointing at a small
 * OTLP/HTTP (JSON) receiver here. One order whose shipping step fails until the supervisor has retried it
 * must be one trace across the three processes: every step attempt with its remote call, the
 * supervisor's retry among them.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TaskEvent } from '@triad/protocol';
import { startNats, startRedis, waitFor, withTeardown, type NatsServer, type RedisServer } from '../harness/index.js';
import { fastExampleOrders, startTriad, type TestTriad } from '../support/triad.js';

interface OtlpSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  attributes?: { key: string; value: { stringValue?: string; intValue?: string | number; boolValue?: boolean } }[];
}
interface Received extends OtlpSpan {
  service: string;
}

const td = withTeardown(afterAll);
const received: Received[] = [];
let nats: NatsServer;
let redis: RedisServer;
let receiver: Server;
let t: TestTriad;

beforeAll(async () => {
  // The OTLP/HTTP JSON receiver: POST /v1/traces with resourceSpans[].scopeSpans[].spans[].
  receiver = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      try {
        const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as {
          resourceSpans?: { resource?: { attributes?: OtlpSpan['attributes'] }; scopeSpans?: { spans?: OtlpSpan[] }[] }[];
        };
        for (const rs of body.resourceSpans ?? []) {
          const service = rs.resource?.attributes?.find((a) => a.key === 'service.name')?.value.stringValue ?? '?';
          for (const ss of rs.scopeSpans ?? []) for (const s of ss.spans ?? []) received.push({ ...s, service });
        }
      } catch {
        // not JSON: ignored (the assertions below then fail with what was received)
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
  td.add(() => new Promise<void>((r) => receiver.close(() => r())));
  const endpoint = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}`;
  [nats, redis] = await Promise.all([startNats({ teardown: td }), startRedis({ teardown: td })]);
  t = await startTriad(
    td,
    { nats, redis },
    { registerOrders: false, faults: { shipping: { failRate: 1 } }, env: { OTEL_EXPORTER_OTLP_ENDPOINT: endpoint, OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json', OTEL_BSP_SCHEDULE_DELAY: '100' } },
  );
  await t.client.registerWorkflow(fastExampleOrders({ budgetMs: 2_000, retry: { maxAttempts: 1, initialDelayMs: 10, maxDelayMs: 10 }, ladder: { retries: 3, longBackoffMs: 500, maxFailures: 6 } }));
}, 60_000);

const attr = (s: OtlpSpan, key: string): unknown => {
  const v = s.attributes?.find((a) => a.key === key)?.value;
  return v?.stringValue ?? (v?.intValue !== undefined ? Number(v.intValue) : v?.boolValue);
};

describe('tracing across processes (OTLP from OTEL_* variables)', () => {
  it('one order with a supervisor retry is one trace across the scheduler, the agents and the supervisor', async () => {
    const { taskId } = await t.client.submit('orders', { orderId: 'traced-1', amount: 12 });
    // Heal shipping once the supervisor has retried it: attempt 2 then succeeds.
    const state = await t.client.wait(taskId, {
      timeoutMs: 30_000,
      onEvent: (e: TaskEvent) => {
        if (e.type === 'step_retried' && e.step === 'ship') t.services.shipping.setFaults({ failRate: 0 });
      },
    });
    expect(state.status).toBe('completed');

    const spans = await waitFor(
      () => {
        const mine = received.filter((s) => attr(s, 'triad.task_id') === taskId);
        const attempts = mine.filter((s) => s.name.startsWith('triad.step '));
        return attempts.length >= 5 && mine.some((s) => s.name === 'triad.supervisor.retry') ? received : undefined;
      },
      { timeoutMs: 15_000, what: 'the spans of the order from every process', lastSeen: () => received.map((s) => `${s.service}:${s.name}`).join(', ') },
    );
    const receive = spans.find((s) => s.name === 'triad.task.receive' && attr(s, 'triad.task_id') === taskId);
    expect(receive?.service).toBe('triad-scheduler');
    const traceId = receive!.traceId;
    const trace = spans.filter((s) => s.traceId === traceId);
    expect(new Set(trace.map((s) => s.service))).toEqual(new Set(['triad-scheduler', 'triad-order-agents', 'triad-supervisor']));

    const ship = trace
      .filter((s) => s.name === 'triad.step shipping')
      .map((s) => ({ attempt: attr(s, 'triad.attempt'), outcome: attr(s, 'triad.outcome') }))
      .sort((a, b) => Number(a.attempt) - Number(b.attempt));
    expect(ship).toEqual([
      { attempt: 1, outcome: 'retryable' },
      { attempt: 2, outcome: 'ok' },
    ]);
    for (const agent of ['inventory', 'fraud', 'payment']) expect(trace.some((s) => s.name === `triad.step ${agent}` && attr(s, 'triad.outcome') === 'ok'), `${agent} attempt in the trace`).toBe(true);
    // Each attempt's remote call is its child (the undici instrumentation the agents' SDK set up).
    const attempts = trace.filter((s) => s.name.startsWith('triad.step '));
    for (const a of attempts) {
      expect(trace.some((s) => s.parentSpanId === a.spanId && s.name.startsWith('POST')), `${a.name} #${String(attr(a, 'triad.attempt'))} has its remote call as a child`).toBe(true);
    }
    const retry = trace.find((s) => s.name === 'triad.supervisor.retry');
    expect(retry?.service).toBe('triad-supervisor');
    expect(attr(retry!, 'triad.step')).toBe('ship');
    // Log lines written inside the task's spans carry its trace id (the pino mixin): the supervisor's retry logs one.
    const logs = [...t.schedulers, ...t.supervisors, ...t.agents].map((p) => p.output()).join('\n');
    const traced = logs.split('\n').filter((l) => l.includes(`"trace_id":"${traceId}"`));
    expect(traced.length, 'log lines with the trace id').toBeGreaterThan(0);
  }, 60_000);
});
