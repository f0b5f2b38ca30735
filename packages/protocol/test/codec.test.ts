// Proves the wire contract: every message schema survives encode→decode, bad bytes never throw but yield typed errors, and names/config reject bad input clearly.
import { describe, expect, it } from 'vitest';
import type { z } from 'zod';
import {
  AlertSchema,
  API_OPS,
  CLIENT_SCOPED_OPS,
  ApiReplySchema,
  DeadLetterSchema,
  DEFAULT_MAX_MESSAGE_BYTES,
  ErrorCode,
  MAX_ISSUE_CHARS,
  MAX_LISTED_ISSUES,
  MAX_NESTING_DEPTH,
  GetTaskRequestSchema,
  GetWorkflowRequestSchema,
  ListTasksRequestSchema,
  ListWorkflowsRequestSchema,
  NAME_PATTERN,
  NameSchema,
  RegisterWorkflowRequestSchema,
  StepRequestSchema,
  StepResultSchema,
  SubmissionSchema,
  SupervisorCommandSchema,
  TASK_ID_PATTERN,
  TaskEventSchema,
  TaskEventBatchSchema,
  TaskIdSchema,
  TaskStateSchema,
  TaskSummarySchema,
  TriadError,
  decode,
  decodeOrThrow,
  decodeResults,
  encode,
  MAX_RESULTS_PER_BATCH,
  isTriadError,
  names,
  unpackTrusted,
  validate,
  WorkflowDefinitionSchema,
  type Decoded,
  type Names,
} from '../src/index.js';

const T0 = 1_732_268_000_000; // a realistic epoch-ms timestamp (needs more than 32 bits)

function roundTrip<S extends z.ZodType>(schema: S, value: unknown, what = 'message'): z.output<S> {
  const bytes = encode(value);
  expect(bytes).toBeInstanceOf(Uint8Array);
  const d = decode(bytes, schema, what);
  if (!d.ok) throw new Error(`round trip failed: ${d.error.message}`);
  return d.value;
}

function expectError<T>(d: Decoded<T>, code: string): TriadError {
  expect(d.ok).toBe(false);
  if (d.ok) throw new Error('expected a decode error');
  expect(d.error).toBeInstanceOf(TriadError);
  expect(d.error.code).toBe(code);
  return d.error;
}

const stepRequest = {
  taskId: 'order-2024-11-22:0001',
  workflow: 'orders',
  version: 3,
  step: 'charge',
  agent: 'payment',
  kind: 'run',
  attempt: 2,
  idempotencyKey: 'prod:order-2024-11-22:0001:charge',
  completeBy: T0 + 10_000,
  input: { orderId: 'o-17', amount: 129.95, currency: 'EUR', lines: [{ sku: 'A-1', qty: 2 }], gift: false, note: null },
  needs: { reserve: { reservationId: 'r-9', expiresAt: T0 + 60_000 } },
  retry: { maxAttempts: 3, initialDelayMs: 100, maxDelayMs: 5_000 },
  dispatchedAt: T0,
};

describe('encode/decode round trip of every message schema', () => {
  it('Submission (with and without optional fields)', () => {
    const full = { taskId: 't-1', workflow: 'orders', version: 2, input: { orderId: 'o-1', amount: 10 }, replyTo: '_INBOX.abc123', submittedAt: T0 };
    expect(roundTrip(SubmissionSchema, full)).toEqual(full);
    const minimal = { taskId: 't-2', workflow: 'orders', input: [1, 'two', { three: 3 }], submittedAt: T0 };
    expect(roundTrip(SubmissionSchema, minimal)).toEqual(minimal);
  });

  it('StepRequest, including nested input, needs and the retry policy', () => {
    expect(roundTrip(StepRequestSchema, stepRequest)).toEqual(stepRequest);
    const compensate = { ...stepRequest, kind: 'compensate', idempotencyKey: `${stepRequest.idempotencyKey}:compensate`, needs: {} };
    delete (compensate as { retry?: unknown }).retry;
    expect(roundTrip(StepRequestSchema, compensate)).toEqual(compensate);
  });

  it('StepResult ok and failed', () => {
    const base = { taskId: 't-1', step: 'charge', kind: 'run', attempt: 2, agentId: 'agent-host-1-4242-ab12', finishedAt: T0 + 812, tries: 3 };
    const ok = { ...base, ok: true, output: { chargeId: 'ch_1', amount: 129.95 } };
    expect(roundTrip(StepResultSchema, ok)).toEqual(ok);
    const failed = { ...base, ok: false, error: { message: 'card declined', retryable: false, name: 'PermanentError' } };
    expect(roundTrip(StepResultSchema, failed)).toEqual(failed);
  });

  it('TaskEvent, SupervisorCommand (each variant), Alert', () => {
    const ev = { taskId: 't-1', seq: 7, type: 'step_failed', status: 'running', step: 'charge', attempt: 2, at: T0, reason: 'timeout', error: { code: 'TIMEOUT', message: 'x', details: ['a'] } };
    expect(roundTrip(TaskEventSchema, ev)).toEqual(ev);
    const batch = { taskId: 't-1', events: [ev, { ...ev, seq: 8, type: 'step_retried', attempt: 3 }] };
    expect(roundTrip(TaskEventBatchSchema, batch)).toEqual(batch);
    expect(TaskEventBatchSchema.safeParse({ taskId: 't-1', events: [] }).success).toBe(false);
    for (const cmd of [
      { type: 'retry_step', taskId: 't-1', step: 'charge', kind: 'run', attempt: 3, epoch: 4 },
      { type: 'retry_step', taskId: 't-1', step: 'charge', kind: 'compensate', attempt: 1, epoch: 0 },
    ]) {
      expect(roundTrip(SupervisorCommandSchema, cmd)).toEqual(cmd);
    }
    const alert = { id: 'al-1', kind: 'step_error', taskId: 't-1', step: 'charge', failureCount: 6, lastError: 'complete-by passed', raisedAt: T0 };
    expect(roundTrip(AlertSchema, alert)).toEqual(alert);
  });

  // Decision 0019 §8.2 (protocol §9: enums may gain values): an event type or a status this reader does
  // not know decodes as the string it is, instead of refusing the whole batch or task; writers' enums
  // (requests) stay strict.
  it('readers keep event types and statuses they do not know, as is', () => {
    const ev = { taskId: 't-1', seq: 9, type: 'step_sleeping', status: 'hibernating', step: 'cool-off', at: T0 };
    const batch = roundTrip(TaskEventBatchSchema, { taskId: 't-1', events: [ev, { taskId: 't-1', seq: 10, type: 'step_done', at: T0 }] });
    expect(batch.events.map((e) => e.type)).toEqual(['step_sleeping', 'step_done']);
    expect(batch.events[0]?.status).toBe('hibernating');
    const state = {
      taskId: 't-1',
      workflow: 'approved-orders',
      version: 1,
      status: 'pondering',
      lockEpoch: 0,
      seq: 10,
      createdAt: T0,
      updatedAt: T0,
      steps: [{ name: 'approval', agent: '', status: 'skipped', attempt: 0, failureCount: 0, dependsOn: [] }],
    };
    expect(roundTrip(TaskStateSchema, state)).toEqual(state);
    expect(roundTrip(TaskSummarySchema, { taskId: 't-1', workflow: 'w', version: 1, status: 'pondering', createdAt: T0, updatedAt: T0 }).status).toBe('pondering');
    // Still a string, short, and not empty.
    expect(TaskEventSchema.safeParse({ ...ev, type: 42 }).success).toBe(false);
    expect(TaskEventSchema.safeParse({ ...ev, type: '' }).success).toBe(false);
    expect(TaskEventSchema.safeParse({ ...ev, type: 'x'.repeat(101) }).success).toBe(false);
    // A request names only statuses this version knows.
    expect(ListTasksRequestSchema.safeParse({ status: 'pondering' }).success).toBe(false);
  });

  it('DeadLetter keeps the original bytes', () => {
    const original = new Uint8Array([0xc1, 0x00, 0xff, 0x10]);
    const dl = { source: 'step.payment', reason: 'not valid msgpack', receivedAt: T0, deliveries: 5, original };
    const back = roundTrip(DeadLetterSchema, dl);
    expect(back.original).toBeInstanceOf(Uint8Array);
    expect(Array.from(back.original)).toEqual([0xc1, 0x00, 0xff, 0x10]);
    expect({ ...back, original: undefined }).toEqual({ ...dl, original: undefined });
  });

  it('API requests, task state and replies', () => {
    expect(roundTrip(RegisterWorkflowRequestSchema, { definition: { name: 'orders', steps: [{ name: 'a', agent: 'x' }] } })).toEqual({
      definition: { name: 'orders', steps: [{ name: 'a', agent: 'x' }] },
    });
    expect(roundTrip(GetWorkflowRequestSchema, { name: 'orders', version: 1 })).toEqual({ name: 'orders', version: 1 });
    expect(roundTrip(ListWorkflowsRequestSchema, {})).toEqual({});
    expect(roundTrip(GetTaskRequestSchema, { taskId: 't-1' })).toEqual({ taskId: 't-1' });
    // The default limit is applied on decode.
    expect(roundTrip(ListTasksRequestSchema, { status: 'failed' })).toEqual({ status: 'failed', limit: 100 });
    const state = {
      taskId: 't-1',
      workflow: 'orders',
      version: 1,
      status: 'running',
      input: { orderId: 'o-1' },
      lockedBy: 'sched-1',
      lockEpoch: 2,
      seq: 3,
      createdAt: T0,
      updatedAt: T0 + 5,
      steps: [
        { name: 'reserve', agent: 'inventory', status: 'processed', attempt: 1, failureCount: 0, startedAt: T0, finishedAt: T0 + 3, output: { id: 'r' }, dependsOn: [] },
        { name: 'charge', agent: 'payment', status: 'processing', attempt: 1, completeBy: T0 + 10_003, failureCount: 0, startedAt: T0 + 3, dependsOn: ['reserve'] },
      ],
    };
    expect(roundTrip(TaskStateSchema, state)).toEqual(state);
    const summary = { taskId: 't-1', workflow: 'orders', version: 1, status: 'completed', createdAt: T0, updatedAt: T0 + 9 };
    expect(roundTrip(TaskSummarySchema, summary)).toEqual(summary);
    expect(roundTrip(ApiReplySchema, { ok: true, value: [summary] })).toEqual({ ok: true, value: [summary] });
    const err = { ok: false, error: { code: 'UNKNOWN_TASK', message: 'no task', details: [] } };
    expect(roundTrip(ApiReplySchema, err)).toEqual(err);
  });

  // A value the schema accepts must survive the codec. encode() drops undefined properties, so a
  // required z.unknown() key whose value is undefined (a handler that returns nothing, a task submitted
  // without input) must still decode. Documents the intended behaviour; see the report if it fails.
  it('a void handler result (output undefined, accepted by the schema) still decodes after encode', () => {
    const voidResult = { taskId: 't-1', step: 'notify', kind: 'run', attempt: 1, agentId: 'a-1', finishedAt: T0, tries: 1, ok: true, output: undefined };
    expect(StepResultSchema.safeParse(voidResult).success).toBe(true);
    const d = decode(encode(voidResult), StepResultSchema, 'step result');
    expect(d.ok ? 'ok' : d.error.message).toBe('ok');
  });

  it('a submission without input (input undefined, accepted by the schema) still decodes after encode', () => {
    const noInput = { taskId: 't-3', workflow: 'orders', input: undefined, submittedAt: T0 };
    expect(SubmissionSchema.safeParse(noInput).success).toBe(true);
    const d = decode(encode(noInput), SubmissionSchema, 'submission');
    expect(d.ok ? 'ok' : d.error.message).toBe('ok');
  });
});

describe('decode never throws on untrusted bytes', () => {
  const cases: [string, Uint8Array][] = [
    ['truncated array', new Uint8Array([0x92, 0x01])],
    ['truncated map', new Uint8Array([0x81])],
    ['truncated str8', new Uint8Array([0xd9, 0x05, 0x61])],
    ['empty buffer', new Uint8Array([])],
  ];
  for (const [label, bytes] of cases) {
    it(`malformed msgpack (${label}) → INVALID_MESSAGE naming what was decoded`, () => {
      let d: Decoded<unknown> | undefined;
      expect(() => {
        d = decode(bytes, SubmissionSchema, 'submission');
      }).not.toThrow();
      const e = expectError(d as Decoded<unknown>, ErrorCode.InvalidMessage);
      expect(e.message).toMatch(/^submission /);
    });
  }

  it('trailing garbage after a valid message → INVALID_MESSAGE', () => {
    const good = encode({ taskId: 't-1', workflow: 'orders', input: {}, submittedAt: T0 });
    expect(decode(good, SubmissionSchema, 'submission').ok).toBe(true);
    const bad = new Uint8Array([...good, 0x01, 0x02, 0x03]);
    const e = expectError(decode(bad, SubmissionSchema, 'submission'), ErrorCode.InvalidMessage);
    expect(e.message).toContain('submission');
  });

  it('a valid message of the wrong schema → INVALID_MESSAGE listing each bad field by path', () => {
    const result = encode({ taskId: 't-1', step: 'charge', kind: 'run', attempt: 1, agentId: 'a', finishedAt: T0, tries: 1, ok: true, output: 1 });
    const e = expectError(decode(result, StepRequestSchema, 'step request'), ErrorCode.InvalidMessage);
    expect(e.message).toMatch(/^step request is invalid: /);
    for (const field of ['workflow', 'version', 'agent', 'idempotencyKey', 'completeBy', 'needs', 'dispatchedAt']) {
      expect(e.message).toContain(`${field}:`);
      expect(e.details.some((d) => d.startsWith(`${field}:`))).toBe(true);
    }
  });

  it('a wrong field names the nested path; a non-object names (root)', () => {
    const e = expectError(decode(encode({ ...stepRequest, retry: { maxAttempts: 0, initialDelayMs: 1, maxDelayMs: 1 } }), StepRequestSchema, 'step request'), ErrorCode.InvalidMessage);
    expect(e.details).toHaveLength(1);
    expect(e.details[0]).toMatch(/^retry\.maxAttempts: /);
    const root = expectError(decode(encode(42), StepRequestSchema, 'step request'), ErrorCode.InvalidMessage);
    expect(root.details[0]).toMatch(/^\(root\): /);
  });

  it('unknown keys are ignored within protocol v1 (a newer writer), bad names are rejected', () => {
    const d = decode(encode({ ...stepRequest, extra: 1 }), StepRequestSchema, 'step request');
    expect(d.ok && d.value).toEqual(stepRequest);
    const bad = expectError(decode(encode({ ...stepRequest, step: 'bad.step' }), StepRequestSchema, 'step request'), ErrorCode.InvalidMessage);
    expect(bad.details.some((d) => d.startsWith('step:'))).toBe(true);
  });

  it('values nested deeper than MAX_NESTING_DEPTH → INVALID_MESSAGE, the same whether or not the decoder stack would hold', () => {
    const nest = (depth: number): unknown => {
      let v: unknown = 'leaf';
      for (let i = 0; i < depth; i++) v = [v];
      return v;
    };
    // The submission map is level 1, so its input may nest MAX_NESTING_DEPTH - 1 levels.
    const at = (depth: number): Uint8Array => encode({ taskId: 't-1', workflow: 'orders', input: nest(depth - 1), submittedAt: T0 });
    expect(decode(at(MAX_NESTING_DEPTH), SubmissionSchema, 'submission').ok).toBe(true);
    const over = expectError(decode(at(MAX_NESTING_DEPTH + 1), SubmissionSchema, 'submission'), ErrorCode.InvalidMessage);
    expect(over.message).toBe(`submission is nested more than ${MAX_NESTING_DEPTH} levels deep (maps and arrays); flatten it`);
    // Far deeper than any stack: msgpackr's recursion overflows, and the answer is the same.
    const abyss = new Uint8Array(100_001).fill(0x91);
    abyss[100_000] = 0xc0;
    expect(expectError(decode(abyss, SubmissionSchema, 'submission'), ErrorCode.InvalidMessage).message).toBe(over.message);
    const item = decodeResults(encode({ results: [abyss] }));
    expect(item.ok && item.value.items[0]?.ok === false && item.value.items[0].error.message).toMatch(/step result 1 of a batch is nested more than/);
    expect(!decodeResults(abyss).ok).toBe(true);
  });

  it('a reason stays bounded however many fields are bad: issues clipped, at most MAX_LISTED_ISSUES listed', () => {
    // Definitions stay strict (messages ignore unknown fields): 50,000 of them make one clipped issue.
    const unknown = Object.fromEntries(Array.from({ length: 50_000 }, (_, i) => [`k${i}`, null]));
    const wide = expectError(validate({ name: 'w', steps: [{ name: 'a', agent: 'x' }], ...unknown }, WorkflowDefinitionSchema, 'workflow definition'), ErrorCode.InvalidMessage);
    expect(wide.details).toHaveLength(1);
    expect(wide.details[0]).toMatch(/^\(root\): Unrecognized keys: "k0", "k1"/);
    expect(wide.details[0]!.length).toBeLessThan(MAX_ISSUE_CHARS + 40);
    const steps = Array.from({ length: 250 }, (_, i) => ({ name: `9bad${i}`, agent: 'x' }));
    const many = expectError(validate({ name: 'w', steps }, WorkflowDefinitionSchema, 'workflow definition'), ErrorCode.InvalidMessage);
    expect(many.details).toHaveLength(MAX_LISTED_ISSUES + 1);
    expect(many.details[0]).toMatch(/^steps\.0\.name: /);
    expect(many.details[MAX_LISTED_ISSUES]).toBe(`… and ${250 - MAX_LISTED_ISSUES} more issues`);
  });

  it('oversized bytes → PAYLOAD_TOO_LARGE without being parsed', () => {
    const small = encode({ taskId: 't-1', workflow: 'orders', input: 'x'.repeat(100), submittedAt: T0 });
    const e = expectError(decode(small, SubmissionSchema, 'submission', small.length - 1), ErrorCode.PayloadTooLarge);
    expect(e.message).toContain('submission');
    expect(e.message).toContain(String(small.length));
    expect(decode(small, SubmissionSchema, 'submission', small.length).ok).toBe(true);
    // At the default limit, garbage that is too large is refused on size alone.
    const huge = new Uint8Array(DEFAULT_MAX_MESSAGE_BYTES + 1).fill(0xc1);
    expectError(decode(huge, SubmissionSchema, 'submission'), ErrorCode.PayloadTooLarge);
  });

  it('decodeOrThrow throws the same TriadError', () => {
    expect(() => decodeOrThrow(new Uint8Array([0x92]), SubmissionSchema, 'submission')).toThrow(TriadError);
    try {
      decodeOrThrow(encode({}), SubmissionSchema, 'submission');
      expect.unreachable();
    } catch (e) {
      expect(isTriadError(e, ErrorCode.InvalidMessage)).toBe(true);
    }
  });
});

describe('encode', () => {
  it('refuses a message over the limit with PAYLOAD_TOO_LARGE', () => {
    const value = { blob: 'y'.repeat(2_000) };
    expect(() => encode(value, 1_000)).toThrow(TriadError);
    try {
      encode(value, 1_000);
      expect.unreachable();
    } catch (e) {
      expect(isTriadError(e, ErrorCode.PayloadTooLarge)).toBe(true);
      expect((e as Error).message).toContain('1000');
    }
    expect(() => encode({ blob: 'z'.repeat(DEFAULT_MAX_MESSAGE_BYTES) })).toThrow(/over the limit/);
    expect(encode(value, 10_000).length).toBeLessThanOrEqual(10_000);
  });

  it('drops undefined optional properties: the decoded object has no such key', () => {
    const bytes = encode({ taskId: 't-1', workflow: 'orders', version: undefined, replyTo: undefined, input: { a: 1, b: undefined }, submittedAt: T0 });
    const raw = unpackTrusted(bytes) as Record<string, unknown>;
    expect(Object.keys(raw).sort()).toEqual(['input', 'submittedAt', 'taskId', 'workflow']);
    const d = decode(bytes, SubmissionSchema, 'submission');
    if (!d.ok) throw d.error;
    expect('version' in d.value).toBe(false);
    expect('replyTo' in d.value).toBe(false);
    expect(Object.keys(d.value.input as object)).toEqual(['a']);
  });

  it('keeps large integers exact (epoch ms, counters above 2^32)', () => {
    const v = { n: T0, big: Number.MAX_SAFE_INTEGER, neg: -T0 };
    expect(unpackTrusted(encode(v))).toEqual(v);
  });
});

describe('validate', () => {
  it('has the decode error shape for already-decoded values', () => {
    const e = expectError(validate({ taskId: 'has space', workflow: 'orders', input: null, submittedAt: -1 }, SubmissionSchema, 'submission'), ErrorCode.InvalidMessage);
    expect(e.details.map((d) => d.split(':')[0]).sort()).toEqual(['submittedAt', 'taskId']);
  });
});

/** NATS subject matching: `*` matches one token, `>` one or more trailing tokens. */
function subjectMatches(filter: string, subject: string): boolean {
  const f = filter.split('.');
  const s = subject.split('.');
  for (let i = 0; i < f.length; i++) {
    if (f[i] === '>') return s.length > i;
    if (i >= s.length) return false;
    if (f[i] !== '*' && f[i] !== s[i]) return false;
  }
  return f.length === s.length;
}

function allSubjects(n: Names): string[] {
  const s = n.subjects;
  return [
    s.submit('c1'), s.submitAll, s.step('payment'), s.stepAll, s.result('payment'), s.resultAll, s.command, s.event('c1', 't-1'), s.eventOfTask('t-1'), s.eventAll, s.alert,
    s.deadLetter('submit'), s.deadLetterAll, ...API_OPS.map((op) => s.api(op)), ...CLIENT_SCOPED_OPS.map((op) => s.clientApi('c1', op)), s.apiAll, s.health, `${s.inboxPrefix('c1')}.x`,
  ];
}

describe('names()', () => {
  it('two namespaces have disjoint subjects, wildcards and streams', () => {
    const pairs: [string, string][] = [['prod', 'staging'], ['a', 'a_b'], ['a', 'a-b'], ['x', 'X']];
    for (const [a, b] of pairs) {
      const na = names(a);
      const nb = names(b);
      expect(na.namespace).toBe(a);
      const sa = allSubjects(na);
      const sb = allSubjects(nb);
      for (const x of sa) for (const y of sb) {
        expect(subjectMatches(x, y), `${x} must not match ${y}`).toBe(false);
        expect(subjectMatches(y, x), `${y} must not match ${x}`).toBe(false);
      }
      const streamsA = Object.values(na.streams);
      const streamsB = Object.values(nb.streams);
      expect(new Set([...streamsA, ...streamsB]).size).toBe(streamsA.length + streamsB.length);
      expect(na.queueGroup).not.toBe(nb.queueGroup);
    }
  });

  it('subjects of one namespace are matched by its own wildcards', () => {
    const n = names('dev');
    expect(subjectMatches(n.subjects.stepAll, n.subjects.step('payment'))).toBe(true);
    expect(subjectMatches(n.subjects.eventAll, n.subjects.event('c1', 't-1'))).toBe(true);
    expect(subjectMatches(n.subjects.eventOfTask('t-1'), n.subjects.event('c1', 't-1'))).toBe(true);
    expect(subjectMatches(n.subjects.eventOfTask('t-2'), n.subjects.event('c1', 't-1'))).toBe(false);
    expect(subjectMatches(n.subjects.submitAll, n.subjects.submit('c1'))).toBe(true);
    expect(subjectMatches(n.subjects.resultAll, n.subjects.result('payment'))).toBe(true);
    // The identity in a subject is read back exactly; anything else names no one.
    expect(n.submitter(n.subjects.submit('shop-1'))).toBe('shop-1');
    expect(n.resultAgent(n.subjects.result('payment'))).toBe('payment');
    expect(n.submitter('triad.dev.submit')).toBeUndefined();
    expect(n.submitter('triad.other.submit.c1')).toBeUndefined();
    expect(n.resultAgent('triad.dev.result.a.b')).toBeUndefined();
    expect(subjectMatches(n.subjects.deadLetterAll, n.subjects.deadLetter('result'))).toBe(true);
    for (const op of API_OPS) expect(subjectMatches(n.subjects.apiAll, n.subjects.api(op))).toBe(true);
    for (const op of CLIENT_SCOPED_OPS) expect(subjectMatches(n.subjects.apiAll, n.subjects.clientApi('c1', op))).toBe(true);
    // Stream names must be valid JetStream names: no dots, wildcards or spaces.
    for (const s of Object.values(n.streams)) expect(s).toMatch(/^[A-Za-z0-9_-]+$/);
  });

  it('reads an API subject back: the operation, and the client of a client-scoped one (decision 0017)', () => {
    const n = names('dev');
    for (const op of API_OPS) expect(n.apiRequest(n.subjects.api(op))).toEqual({ op });
    for (const op of CLIENT_SCOPED_OPS) expect(n.apiRequest(n.subjects.clientApi('shop-1', op))).toEqual({ op, client: 'shop-1' });
    // `client` is reserved after `api.`: no operation may be mistaken for a scoped subject.
    for (const op of API_OPS) expect(op.split('.')[0]).not.toBe('client');
    for (const bad of ['triad.dev.api.client.web.task.cancel', 'triad.dev.api.client.web', 'triad.dev.api.client.1web.task.get', 'triad.dev.api.client.web.x.task.get', 'triad.dev.api.nothing', 'triad.other.api.task.get']) {
      expect(n.apiRequest(bad), bad).toBeUndefined();
    }
  });

  it('rejects an invalid namespace', () => {
    for (const bad of ['', 'a.b', 'a*', 'a>', 'has space', 'x'.repeat(41), 'ns/1', 'a:b']) {
      expect(() => names(bad), JSON.stringify(bad)).toThrow(/namespace/);
    }
    expect(() => names('x'.repeat(40))).not.toThrow();
  });
});

describe('name and task id patterns', () => {
  it('NAME_PATTERN: starts with a letter, at most 64 of letters, digits, _ and -', () => {
    for (const ok of ['a', 'orders', 'Charge-card_2', `a${'b'.repeat(63)}`]) {
      expect(NAME_PATTERN.test(ok), ok).toBe(true);
      expect(NameSchema.safeParse(ok).success).toBe(true);
    }
    for (const bad of ['', '1abc', '_a', '-a', 'a.b', 'a b', 'a*', 'a>', 'a|b', 'a:b', `a${'b'.repeat(64)}`]) {
      expect(NAME_PATTERN.test(bad), bad).toBe(false);
      expect(NameSchema.safeParse(bad).success).toBe(false);
    }
  });

  it('TASK_ID_PATTERN: 1-128 of letters, digits, _, - and :', () => {
    for (const ok of ['1', 'order:2024-11-22_0001', '550e8400-e29b-41d4-a716-446655440000', 'x'.repeat(128)]) {
      expect(TASK_ID_PATTERN.test(ok), ok).toBe(true);
      expect(TaskIdSchema.safeParse(ok).success).toBe(true);
    }
    for (const bad of ['', 'a.b', 'a b', 'a*', 'a>', '{a}', 'a|b', 'x'.repeat(129)]) {
      expect(TASK_ID_PATTERN.test(bad), bad).toBe(false);
      expect(TaskIdSchema.safeParse(bad).success).toBe(false);
    }
  });
});

describe('results messages: one result, or a batch of separately encoded results', () => {
  const result = (taskId: string) => ({ taskId, step: 's1', kind: 'run', attempt: 1, agentId: 'a-1', finishedAt: T0, tries: 1, ok: true, output: { n: 1 } });

  it('a bare result decodes as a single item carrying the message bytes', () => {
    const bytes = encode(result('t-1'));
    const d = decodeResults(bytes);
    expect(d.ok).toBe(true);
    if (!d.ok) return;
    expect(d.value.single).toBe(true);
    expect(d.value.items).toHaveLength(1);
    expect(d.value.items[0]).toMatchObject({ ok: true, value: { taskId: 't-1', output: { n: 1 } } });
    expect(d.value.items[0]!.bytes).toBe(bytes);
  });

  it('a batch decodes item by item: a bad item is reported with its own bytes and does not spoil the others', () => {
    const good = encode(result('t-2'));
    const wrong = encode({ taskId: 't-3', ok: 'maybe' });
    const junk = new Uint8Array([0xc1, 0xff]);
    const d = decodeResults(encode({ results: [good, wrong, junk] }));
    expect(d.ok).toBe(true);
    if (!d.ok) return;
    expect(d.value.single).toBe(false);
    const [a, b, c] = d.value.items;
    expect(a).toMatchObject({ ok: true, value: { taskId: 't-2' } });
    expect(b?.ok).toBe(false);
    expect(b?.ok === false && b.error.message).toMatch(/step result 2 of a batch is invalid/);
    expect([...b!.bytes]).toEqual([...wrong]);
    expect(c?.ok === false && c.error.message).toMatch(/step result 3 of a batch is not valid msgpack/);
  });

  it("a batch's traceparents give each result its own trace context; without them (an older agent) none", () => {
    const tp = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';
    const d = decodeResults(encode({ results: [encode(result('t-4')), encode(result('t-5'))], traceparents: [tp, ''] }));
    expect(d.ok && d.value.items.map((i) => i.traceparent)).toEqual([tp, undefined]);
    const old = decodeResults(encode({ results: [encode(result('t-6'))] }));
    expect(old.ok && old.value.items[0]?.traceparent).toBeUndefined();
    const long = decodeResults(encode({ results: [encode(result('t-7'))], traceparents: ['x'.repeat(300)] }));
    expect(!long.ok && long.error.message).toMatch(/traceparents.*at most 256 characters/);
  });

  it('refuses a message that is neither, an empty or oversized batch, and bytes over the limit, with the reason', () => {
    const bad = decodeResults(encode({ taskId: 'x', ok: 'maybe' }));
    expect(!bad.ok && bad.error.message).toMatch(/^step result is invalid/);
    const empty = decodeResults(encode({ results: [] }));
    expect(!empty.ok && empty.error.message).toMatch(/step result batch is invalid: results/);
    const many = decodeResults(encode({ results: Array.from({ length: MAX_RESULTS_PER_BATCH + 1 }, () => encode(result('t'))) }));
    expect(!many.ok && many.error.message).toMatch(/step result batch is invalid/);
    const strings = decodeResults(encode({ results: ['not bytes'] }));
    expect(!strings.ok && strings.error.message).toMatch(/must be binary/);
    const garbage = decodeResults(new Uint8Array([0xc1, 0xff]));
    expect(!garbage.ok && garbage.error.message).toMatch(/not valid msgpack/);
    const big = decodeResults(new Uint8Array(DEFAULT_MAX_MESSAGE_BYTES + 1));
    expect(!big.ok && big.error.code).toBe(ErrorCode.PayloadTooLarge);
  });
});
