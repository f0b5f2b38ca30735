/**
 * Every subject a Triad process consumes, with a generator of valid messages for it: the starting
 * points the fuzzer mutates. Which schema judges a subject is part of the target; the verdicts come from
 * the schemas themselves (oracle.ts).
 */
import fc from 'fast-check';
import { API, API_OPS, CLIENT_SCOPED_OPS, DEFAULT_CLIENT_ID, TaskStatusSchema, encode, type ApiOp, type Names } from '@triad/protocol';
import type { z } from 'zod';

/** The order agents `startTriad` runs: the only agent types with a consumer on the steps stream. */
export const ORDER_AGENTS = ['inventory', 'fraud', 'payment', 'shipping'] as const;

/** Stands for the case's own reply subject; replaced when the case is turned into bytes. */
export const REPLY = '@@reply@@';

/** A workflow no one registers: valid submissions naming it are refused as unknown. */
export const UNREGISTERED_WORKFLOW = 'fuzzNowhere';

interface TargetBase {
  /** `submit`, `step.payment`, `result`, `command`, `api.task.get`, `api.client.task.get`, … */
  name: string;
  subject: string;
  /** A valid message for this subject. */
  sample: fc.Arbitrary<unknown>;
}

export type Target = TargetBase &
  (
    | { kind: 'submit'; transport: 'jetstream'; source: 'submit' }
    | { kind: 'step'; transport: 'jetstream'; source: string; agent: string }
    | { kind: 'result'; transport: 'jetstream'; source: 'result' }
    | { kind: 'command'; transport: 'jetstream'; source: 'command' }
    | { kind: 'api'; transport: 'request'; op: ApiOp; schema: z.ZodType }
    | { kind: 'api-unknown'; transport: 'request' }
  );

export type JetStreamTarget = Extract<Target, { transport: 'jetstream' }>;

/** The schema each API operation's request is judged by. A new operation fails to compile until added. */

const name = fc.stringMatching(/^[A-Za-z][A-Za-z0-9_-]{0,15}$/);
/** Task ids of tasks that do not exist (the `fz-` prefix is never used by a real submission here). */
const taskId = fc.stringMatching(/^fz-[a-z0-9]{12}$/);
const json = fc.jsonValue({ maxDepth: 3 });
const orderInput = fc.record({ orderId: fc.stringMatching(/^o[a-z0-9]{1,8}$/), amount: fc.integer({ min: 1, max: 500 }) });
const retryPolicy = fc.record({
  maxAttempts: fc.integer({ min: 1, max: 5 }),
  initialDelayMs: fc.integer({ min: 1, max: 100 }),
  maxDelayMs: fc.integer({ min: 100, max: 1_000 }),
});
const opt = <T>(a: fc.Arbitrary<T>): fc.Arbitrary<T | undefined> => fc.option(a, { nil: undefined });

/** Drops undefined values, as the codec does, so a sample's keys are exactly what is sent. */
function defined<T extends object>(o: T): T {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as T;
}

function submission(now: number): fc.Arbitrary<unknown> {
  return fc
    .record({
      taskId,
      workflow: fc.constantFrom('orders', UNREGISTERED_WORKFLOW),
      version: opt(fc.constantFrom(1, 2)),
      input: opt(fc.oneof(orderInput, json)),
      replyTo: fc.constant(REPLY),
      submittedAt: fc.constant(now),
    })
    .map(defined);
}

function stepRequest(agent: string, now: number): fc.Arbitrary<unknown> {
  return fc
    .record({
      taskId,
      workflow: name,
      version: fc.integer({ min: 1, max: 5 }),
      step: name,
      agent: fc.constant(agent),
      kind: fc.constantFrom('run', 'compensate'),
      attempt: fc.integer({ min: 1, max: 20 }),
      idempotencyKey: fc.string({ minLength: 1, maxLength: 60 }),
      undoes: opt(fc.string({ minLength: 1, maxLength: 60 })),
      // Both sides of "now": a request past its complete-by is dropped on arrival, a current one is claimed.
      completeBy: fc.integer({ min: now - 60_000, max: now + 60_000 }),
      input: opt(fc.oneof(orderInput, json)),
      needs: fc.dictionary(name, json, { maxKeys: 3 }),
      retry: opt(retryPolicy),
      dispatchedAt: fc.constant(now),
    })
    .map(defined);
}

/** A valid step result (also what the items of a generated batch start from). */
export function stepResult(now: number): fc.Arbitrary<Record<string, unknown>> {
  const base = {
    taskId,
    step: name,
    kind: fc.constantFrom('run', 'compensate'),
    attempt: fc.integer({ min: 1, max: 20 }),
    agentId: fc.string({ minLength: 1, maxLength: 40 }),
    finishedAt: fc.constant(now),
    tries: fc.integer({ min: 1, max: 10 }),
  };
  const error = fc
    .record({
      message: fc.string({ maxLength: 80 }),
      retryable: fc.boolean(),
      name: opt(fc.string({ maxLength: 20 })),
      circuitOpen: opt(fc.boolean()),
      retryAfterMs: opt(fc.integer({ min: 0, max: 86_400_000 })),
    })
    .map(defined);
  return fc.oneof(
    fc.record({ ...base, ok: fc.constant(true), output: opt(json) }).map(defined),
    fc.record({ ...base, ok: fc.constant(false), error }),
  );
}

/** A definition the scheduler accepts: two steps of an agent that never runs, one compensated. */
const definition = fc.record({
  name: fc.constant('fuzzFlow'),
  description: opt(fc.string({ maxLength: 40 })),
  onFailure: fc.constantFrom('error', 'compensate'),
  defaults: fc.record({ retry: retryPolicy }),
  steps: fc.tuple(fc.integer({ min: 1, max: 60_000 }), fc.integer({ min: 0, max: 5 })).map(([budgetMs, retries]) => [
    { name: 'first', agent: 'fuzzAgent', budgetMs },
    { name: 'second', agent: 'fuzzAgent', dependsOn: ['first'], needs: ['first'], ladder: { retries }, compensate: { agent: 'fuzzAgent' } },
  ]),
});

function apiSample(op: ApiOp): fc.Arbitrary<unknown> {
  switch (op) {
    case 'workflow.register':
      return fc.record({ definition: definition.map(defined) });
    case 'workflow.get':
      return fc.record({ name, version: opt(fc.integer({ min: 1, max: 9 })) }).map(defined);
    case 'task.get':
      return fc.record({ taskId });
    case 'task.list':
      return fc.record({ status: opt(fc.constantFrom(...TaskStatusSchema.options)), limit: opt(fc.integer({ min: 1, max: 10_000 })) }).map(defined);
    case 'task.query':
    case 'task.count':
      return fc
        .record({
          tags: opt(fc.dictionary(fc.constantFrom('customer', 'region'), fc.string({ minLength: 1, maxLength: 8 }), { maxKeys: 2 })),
          status: opt(fc.constantFrom(...TaskStatusSchema.options)),
          workflow: opt(name),
          since: opt(fc.integer({ min: 0, max: 2_000_000_000_000 })),
          ...(op === 'task.query' ? { limit: opt(fc.integer({ min: 1, max: 1000 })) } : {}),
        })
        .map(defined);
    case 'task.stuck':
      return fc
        .record({
          tags: opt(fc.dictionary(fc.constantFrom('customer', 'region'), fc.string({ minLength: 1, maxLength: 8 }), { maxKeys: 2 })),
          workflow: opt(name),
          limit: opt(fc.integer({ min: 1, max: 200 })),
          scan: opt(fc.integer({ min: 1, max: 10_000 })),
        })
        .map(defined);
    // Bulk operations on an operation id that never starts (apply, checkpoint, end, get answer "no bulk
    // operation"), and starts that only record an operation: the fuzzer never acts on a task in bulk.
    case 'bulk.start':
      return fc.record({ opId: opt(name), action: fc.constantFrom('cancel', 'retry'), filter: fc.record({ tags: fc.constant({ fuzz: 'none' }) }) }).map(defined);
    case 'bulk.apply':
      return fc.record({ opId: fc.constant('fuzzNoOp'), taskIds: fc.array(taskId, { minLength: 1, maxLength: 3 }) });
    case 'bulk.checkpoint':
      return fc.record({ opId: fc.constant('fuzzNoOp'), batch: fc.integer({ min: 1, max: 5 }), counts: fc.constant({ acted: 0, already: 0, skipped: 0, missing: 0, failed: 0 }) });
    case 'bulk.end':
      return fc.record({ opId: fc.constant('fuzzNoOp'), state: fc.constantFrom('done', 'stopped') });
    case 'bulk.get':
      return fc.record({ opId: fc.constant('fuzzNoOp') });
    case 'bulk.list':
      return fc.record({ limit: opt(fc.integer({ min: 1, max: 200 })) }).map(defined);
    case 'task.retry':
      return fc.record({ taskId, step: opt(name), input: opt(json), replaceInput: opt(fc.boolean()) }).map(defined);
    case 'task.cancel':
      return fc.record({ taskId, reason: opt(fc.string({ maxLength: 100 })) }).map(defined);
    case 'task.events':
      return fc.record({ taskId, from: opt(fc.integer({ min: 1, max: 1_000_000 })) }).map(defined);
    case 'task.signal':
      return fc.record({ taskId, name, signalId: taskId, data: opt(json) }).map(defined);
    // Limits on a client the storm never submits as, and so high that even a mutation to `*` (every
    // client) or to a small burst holds nothing back: the fuzzer's own submissions are never delayed.
    case 'intake.set':
      return fc.record({ client: fc.constant('fuzzLimited'), ratePerSecond: fc.integer({ min: 10_000, max: 100_000 }), burst: opt(fc.constant(100_000)) }).map(defined);
    case 'intake.clear':
      return fc.record({ client: fc.constant('fuzzLimited') });
    // A schedule of a workflow that is never registered: refused, so the storm never gets tasks it did not submit.
    case 'schedule.create':
      return fc
        .record({ name, workflow: fc.constant(UNREGISTERED_WORKFLOW), every: opt(fc.constantFrom('10s', '5m', 60_000)), cron: opt(fc.constantFrom('0 2 * * *', '*/5 * * * *')), input: opt(json), overlap: opt(fc.constantFrom('skip', 'allow')) })
        .map(defined);
    // Names of schedules that do not exist (the storm creates none).
    case 'schedule.get':
    case 'schedule.pause':
    case 'schedule.resume':
    case 'schedule.delete':
      return fc.record({ name });
    // Uploads of small inputs into the default client's bucket (a last part's count or digest may not
    // match: refused with the reason), and reads of objects that do not exist.
    case 'payload.put':
      return fc
        .record({ taskId, upload: fc.stringMatching(/^[A-Za-z0-9]{1,22}$/), part: fc.integer({ min: 0, max: 3 }), data: fc.uint8Array({ maxLength: 64 }), last: opt(fc.record({ parts: fc.integer({ min: 1, max: 3 }), size: fc.integer({ min: 0, max: 64 }), sha256: fc.constant('0'.repeat(64)) })) })
        .map(defined);
    case 'payload.get':
      return fc.record({ bucket: fc.constantFrom('triad_4_fuzz_default', 'triad_1_x_y', 'nope'), name: fc.constantFrom('t1/in/x', 'missing') });
    case 'workflow.list':
    case 'alert.list':
    case 'supervisor.status':
    case 'intake.list':
    case 'schedule.list':
      return fc.constant({});
  }
}

/** Every subject a Triad process consumes in namespace `n`, with valid messages stamped around `now`. */
export function targets(n: Names, now: number): Target[] {
  const s = n.subjects;
  return [
    { name: 'submit', kind: 'submit', transport: 'jetstream', source: 'submit', subject: s.submit(DEFAULT_CLIENT_ID), sample: submission(now) },
    ...ORDER_AGENTS.map(
      (agent): Target => ({ name: `step.${agent}`, kind: 'step', transport: 'jetstream', source: `step.${agent}`, agent, subject: s.step(agent), sample: stepRequest(agent, now) }),
    ),
    {
      name: 'result',
      kind: 'result',
      transport: 'jetstream',
      source: 'result',
      subject: s.result('payment'),
      // A bare result, or a batch of valid ones (a batch of mixed items is a category of its own).
      sample: fc.oneof(stepResult(now), fc.array(stepResult(now), { minLength: 1, maxLength: 4 }).map((rs) => ({ results: rs.map((r) => encode(r)) }))),
    },
    {
      name: 'command',
      kind: 'command',
      transport: 'jetstream',
      source: 'command',
      subject: s.command,
      sample: fc.record({
        type: fc.constant('retry_step'),
        taskId,
        step: name,
        kind: fc.constantFrom('run', 'compensate'),
        attempt: fc.integer({ min: 1, max: 20 }),
        epoch: fc.integer({ min: 0, max: 1_000 }),
      }),
    },
    ...API_OPS.map((op): Target => ({ name: `api.${op}`, kind: 'api', transport: 'request', op, schema: API[op].request, subject: s.api(op), sample: apiSample(op) })),
    { name: 'api.unknown', kind: 'api-unknown', transport: 'request', subject: s.apiAll.replace(/>$/, 'fuzz.nothing'), sample: fc.constant({}) },
    // A client's own task reads (decision 0017), as the client the storm submits under: its tasks are that client's.
    ...CLIENT_SCOPED_OPS.map(
      (op): Target => ({ name: `api.client.${op}`, kind: 'api', transport: 'request', op, schema: API[op].request, subject: s.clientApi(DEFAULT_CLIENT_ID, op), sample: apiSample(op) }),
    ),
    { name: 'api.client.unknown', kind: 'api-unknown', transport: 'request', subject: `${s.apiAll.replace(/>$/, '')}client.${DEFAULT_CLIENT_ID}.task.cancel`, sample: fc.constant({}) },
  ];
}
