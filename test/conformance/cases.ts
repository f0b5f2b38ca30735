/**
 * The protocol's cases for an agent (docs/protocol.md §7–§8): for each, the step requests the kit sends,
 * how its service answers, and the judge — a pure function of what was observed, saying what the agent
 * did wrong (so the judges are tested on their own, with made-up observations).
 */
import { createHash } from 'node:crypto';
import { encode, inputObjectName, objectBucket, objectRef, type DeadLetter, type ProbeReply, type StepResult } from '@triad/protocol';
import type { ObservedCall, Reply } from './service.js';

export interface KitContext {
  namespace: string;
  agent: string;
  /** When the kit published the first request (epoch ms). */
  t0: number;
  resultSubject: string;
  deadLetterSubject: string;
}

export interface ObservedRequest {
  msgId: string;
  /** The request as sent (an object for a valid one) and its bytes. */
  value: unknown;
  bytes: Uint8Array;
  publishedAt: number;
  /** When the kit saw it gone from the work-queue stream: acknowledged. */
  ackedAt?: number;
}

export interface ObservedResult {
  subject: string;
  /** The message's Nats-Msg-Id. */
  msgId: string | undefined;
  /** One of several results in one message (`{ results: [bin, …] }`): the message id is the batch's. */
  batched: boolean;
  /** The result's task id, when it has a readable one (valid or not). */
  taskId?: string;
  protocolHeader: string | undefined;
  receivedAt: number;
  /** Decoded and valid by the step result's schema; absent when it is not. */
  value?: StepResult;
  /** What is wrong with the message itself: not msgpack, invalid by the schema, a float for an integer. */
  problems: string[];
}

export interface ObservedDeadLetter {
  subject: string;
  value?: DeadLetter;
  problems: string[];
}

export interface ConsumerSeen {
  durable: string;
  filterSubject?: string;
  ackPolicy?: string;
  ackWaitMs?: number;
  deliverPolicy?: string;
}

/** What the agent instances answered the kit's probes (decision 0021 §3.3), sent while the case's call was held. */
export interface ObservedProbes {
  /** Answers to the probe of the attempt being run. */
  held: { value?: ProbeReply; problems: string[] }[];
  /** Answers to a probe of an attempt no instance holds (the next one). */
  other: { value?: ProbeReply; problems: string[] }[];
  /** False when the kit never saw the call (then nothing was probed). */
  sent: boolean;
}

export interface CaseObservation {
  ctx: KitContext;
  probes?: ObservedProbes;
  requests: ObservedRequest[];
  calls: ObservedCall[];
  results: ObservedResult[];
  deadLetters: ObservedDeadLetter[];
  /** The agent's durable consumer as the kit found it. */
  consumer?: ConsumerSeen;
  judgedAt: number;
}

export interface Verdict {
  problems: string[];
  /** What the agent did, worth knowing but not wrong. */
  notes: string[];
}

export interface CaseSpec {
  name: string;
  /** What the protocol asks of the agent here. */
  title: string;
  /** The task id of the case's requests: results are attributed to a case by it. */
  taskId: string;
  /** Published in this order, one after the other. */
  requests: { value: unknown; msgId: string }[];
  /** Service answers per idempotency key (the calls of this case carry these keys). */
  scripts: [string, Reply[]][];
  /** Keys the service holds as applied before the run. */
  preApplied: string[];
  /** The keys (idempotencyKey or undo's `of`) that attribute a service call to this case. */
  keys: string[];
  /** Milliseconds after t0 before which the case cannot be judged. */
  judgeAfterMs: number;
  /** Probe the agents (attempt 1 of this case's step, and attempt 2) once the service sees the case's call. */
  probe?: boolean;
  /** Objects the kit stores in the object store before it publishes the case's requests (docs/protocol.md §12). */
  objects?: { client: string; name: string; bytes: Uint8Array }[];
  judge(o: CaseObservation): Verdict;
}

/** The ack wait the protocol prescribes for an agent's consumer (§8.1). */
export const ACK_WAIT_MS = 5_000;
const STEP = 's';
const WINDOW_MS = 10_000;

/** The request every case starts from; `over` changes or removes (undefined) fields. */
function stepRequest(ctx: KitContext, taskId: string, over: Record<string, unknown> = {}): Record<string, unknown> {
  const base: Record<string, unknown> = {
    taskId,
    workflow: 'conformance',
    version: 1,
    step: STEP,
    agent: ctx.agent,
    kind: 'run',
    attempt: 1,
    idempotencyKey: runKey(ctx, taskId),
    completeBy: ctx.t0 + WINDOW_MS,
    input: { orderId: taskId, amount: 10 },
    needs: {},
    retry: { maxAttempts: 3, initialDelayMs: 50, maxDelayMs: 200 },
    dispatchedAt: ctx.t0,
    ...over,
  };
  for (const [k, v] of Object.entries(base)) if (v === undefined) delete base[k];
  return base;
}

const runKey = (ctx: KitContext, taskId: string): string => `${ctx.namespace}/${taskId}/${STEP}`;
const msgIdOf = (taskId: string, kind: string, attempt: number, extra = ''): string => `${taskId}:${STEP}:${kind}:${attempt}${extra}`;

/** The checks every result of a case must pass: its message, its subject, its id, its fields. */
function resultProblems(o: CaseObservation, taskId: string, kind: 'run' | 'compensate', attempts: readonly number[]): string[] {
  const p: string[] = [];
  for (const r of o.results) {
    p.push(...r.problems.map((x) => `a result message: ${x}`));
    if (r.subject !== o.ctx.resultSubject) p.push(`a result came on ${r.subject}, not on the agent type's own subject ${o.ctx.resultSubject}`);
    const v = r.value;
    if (!v) continue;
    // A fan-out element's result names its element (decision 0019 §8.3): `<step>#<index>`.
    const wantId = `${v.taskId}:${v.step}${v.item !== undefined ? `#${v.item}` : ''}:${v.kind}:${v.attempt}:result`;
    if (!r.batched && r.msgId !== wantId) p.push(`a result's Nats-Msg-Id is ${JSON.stringify(r.msgId)}, not ${JSON.stringify(wantId)} (<taskId>:<step>[#<index>]:<kind>:<attempt>:result)`);
    if (v.taskId !== taskId || v.step !== STEP) p.push(`a result names ${v.taskId}/${v.step}, not the request's ${taskId}/${STEP}`);
    if (v.kind !== kind) p.push(`a result's kind is ${v.kind}, not the request's ${kind}`);
    if (!attempts.includes(v.attempt)) p.push(`a result's attempt is ${v.attempt}; the requests sent attempt ${attempts.join(' and ')}`);
  }
  return p;
}

const valid = (o: CaseObservation): StepResult[] => o.results.flatMap((r) => (r.value ? [r.value] : []));

function ackProblems(o: CaseObservation): string[] {
  return o.requests.filter((r) => r.ackedAt === undefined).map((r) => `request ${r.msgId} was never acknowledged (still in the STEPS stream ${o.judgedAt - r.publishedAt} ms after it was sent)`);
}

function keyProblems(o: CaseObservation, key: string, path: '/apply' | '/undo', of?: string): string[] {
  const p: string[] = [];
  for (const c of o.calls) {
    if (c.path !== path) p.push(`the agent called ${c.path}, not ${path}`);
    if (c.idempotencyKey !== key) p.push(`a call carried idempotencyKey ${JSON.stringify(c.idempotencyKey)}, not the request's ${JSON.stringify(key)}`);
    if (of !== undefined && c.of !== of) p.push(`an undo named of=${JSON.stringify(c.of)}, not the request's undoes ${JSON.stringify(of)}`);
  }
  return p;
}

function noCallsNoResults(o: CaseObservation, why: string): string[] {
  const p: string[] = [];
  if (o.calls.length > 0) p.push(`the service was called ${o.calls.length} time(s); ${why} there must be no call`);
  if (o.results.length > 0) p.push(`${o.results.length} result(s) were sent; ${why} there must be none`);
  return p;
}

function exactlyOne(o: CaseObservation): StepResult | string {
  const v = valid(o);
  if (v.length === 1 && o.results.length === 1) return v[0]!;
  return o.results.length === 0 ? 'no result was sent' : `${o.results.length} result messages were stored (${v.length} valid); expected exactly one`;
}

function verdict(problems: string[], notes: string[] = []): Verdict {
  return { problems, notes };
}

function circuitHint(r: StepResult): string[] {
  return !r.ok && r.error.circuitOpen ? [`the result says the agent's circuit breaker is open: the kit's failure cases opened it; raise the breaker's threshold for the run`] : [];
}

/** Every case, built for one run. */
export function buildCases(ctx: KitContext): CaseSpec[] {
  const cases: CaseSpec[] = [];
  const add = (c: Omit<CaseSpec, 'scripts' | 'preApplied' | 'keys'> & Partial<Pick<CaseSpec, 'scripts' | 'preApplied' | 'keys'>>): void => {
    cases.push({ scripts: [], preApplied: [], keys: [runKey(ctx, c.taskId)], ...c });
  };

  add({
    name: 'consumer',
    title: `the durable consumer agent-${ctx.agent} on the STEPS stream: filter triad.<ns>.step.${ctx.agent}, explicit ack, ack wait 5 s, deliver all (§8.1)`,
    taskId: 'conf-consumer',
    requests: [],
    judgeAfterMs: 0,
    judge: (o) => {
      const c = o.consumer;
      if (!c) return verdict([`no consumer agent-${o.ctx.agent} exists on the STEPS stream`]);
      const p: string[] = [];
      const want = `triad.${o.ctx.namespace}.step.${o.ctx.agent}`;
      if (c.filterSubject !== want) p.push(`its filter is ${JSON.stringify(c.filterSubject)}, not ${want}`);
      if (c.ackPolicy !== 'explicit') p.push(`its ack policy is ${c.ackPolicy ?? 'unset'}, not explicit`);
      if (c.ackWaitMs !== ACK_WAIT_MS) p.push(`its ack wait is ${c.ackWaitMs ?? '?'} ms, not ${ACK_WAIT_MS}`);
      if (c.deliverPolicy !== 'all') p.push(`its deliver policy is ${c.deliverPolicy ?? 'unset'}, not all`);
      return verdict(p);
    },
  });

  {
    const taskId = 'conf-ok';
    add({
      name: 'ok',
      title: 'the service answers: one result, ok, with the output, acknowledged after it is stored (§8.5, §8.7, §8.8)',
      taskId,
      requests: [{ value: stepRequest(ctx, taskId), msgId: msgIdOf(taskId, 'run', 1) }],
      judgeAfterMs: 0,
      judge: (o) => {
        const p = [...resultProblems(o, taskId, 'run', [1]), ...keyProblems(o, runKey(o.ctx, taskId), '/apply'), ...ackProblems(o)];
        const r = exactlyOne(o);
        if (typeof r === 'string') p.push(r);
        else {
          if (!r.ok) p.push(`the result is a failure (${r.error.message}); the service answered 200`, ...circuitHint(r));
          if (r.tries !== o.calls.length) p.push(`the result says tries=${r.tries} but the service saw ${o.calls.length} call(s)`);
        }
        if (o.calls.length !== 1) p.push(`the service saw ${o.calls.length} calls for one request it answered at once`);
        const notes = typeof r !== 'string' && r.ok && r.output === undefined ? ['the result has no output (allowed)'] : [];
        return verdict(p, notes);
      },
    });
  }

  {
    const taskId = 'conf-retry-then-ok';
    add({
      name: 'retryable-then-ok',
      title: 'the service is unavailable twice (503), then answers: the agent retries inside the window and reports ok with tries=3 (§8.5)',
      taskId,
      requests: [{ value: stepRequest(ctx, taskId, { retry: { maxAttempts: 5, initialDelayMs: 50, maxDelayMs: 200 } }), msgId: msgIdOf(taskId, 'run', 1) }],
      scripts: [[runKey(ctx, taskId), [{ kind: 'status', status: 503 }, { kind: 'status', status: 503 }, { kind: 'ok' }]]],
      judgeAfterMs: 0,
      judge: (o) => {
        const p = [...resultProblems(o, taskId, 'run', [1]), ...keyProblems(o, runKey(o.ctx, taskId), '/apply'), ...ackProblems(o)];
        const r = exactlyOne(o);
        if (typeof r === 'string') p.push(r);
        else {
          if (!r.ok) p.push(`the result is a failure (${r.error.message}); the third call succeeded and retry.maxAttempts was 5`, ...circuitHint(r));
          if (r.tries !== 3) p.push(`the result says tries=${r.tries}; the service answered 503, 503, then 200: 3 tries`);
        }
        if (o.calls.length !== 3) p.push(`the service saw ${o.calls.length} calls, not 3 (503, 503, 200)`);
        return verdict(p);
      },
    });
  }

  {
    const taskId = 'conf-retry-exhausted';
    add({
      name: 'retryable-failure',
      title: 'the service stays unavailable (503): retry.maxAttempts tries inside the window, then one retryable failure with effect none (§8.5, §8.7)',
      taskId,
      requests: [{ value: stepRequest(ctx, taskId), msgId: msgIdOf(taskId, 'run', 1) }],
      scripts: [[runKey(ctx, taskId), [{ kind: 'status', status: 503 }]]],
      judgeAfterMs: 0,
      judge: (o) => {
        const p = [...resultProblems(o, taskId, 'run', [1]), ...keyProblems(o, runKey(o.ctx, taskId), '/apply'), ...ackProblems(o)];
        const completeBy = o.ctx.t0 + WINDOW_MS;
        if (o.calls.some((c) => c.startedAt >= completeBy)) p.push('a call started after complete-by');
        if (o.calls.length !== 3) p.push(`the service saw ${o.calls.length} calls; retry.maxAttempts was 3`);
        const r = exactlyOne(o);
        if (typeof r === 'string') p.push(r);
        else if (r.ok) p.push('the result is ok; every call was answered 503');
        else {
          if (!r.error.retryable) p.push('the failure is not retryable; a 503 is');
          if (r.tries !== o.calls.length) p.push(`the result says tries=${r.tries} but the service saw ${o.calls.length} calls`);
          if (r.error.effect !== 'none') p.push(`error.effect is ${r.error.effect ?? 'absent (unknown)'}, not none: every call was answered 503, which applies nothing`);
          p.push(...circuitHint(r));
        }
        return verdict(p);
      },
    });
  }

  {
    const taskId = 'conf-permanent';
    add({
      name: 'permanent-failure',
      title: 'the service refuses the request (422): one call, one non-retryable failure with effect none, not retried (§8.5, §8.7)',
      taskId,
      requests: [{ value: stepRequest(ctx, taskId), msgId: msgIdOf(taskId, 'run', 1) }],
      scripts: [[runKey(ctx, taskId), [{ kind: 'status', status: 422 }]]],
      judgeAfterMs: 0,
      judge: (o) => {
        const p = [...resultProblems(o, taskId, 'run', [1]), ...keyProblems(o, runKey(o.ctx, taskId), '/apply'), ...ackProblems(o)];
        if (o.calls.length !== 1) p.push(`the service saw ${o.calls.length} calls; a refusal (4xx) is not retried`);
        const r = exactlyOne(o);
        if (typeof r === 'string') p.push(r);
        else if (r.ok) p.push('the result is ok; the service refused the request');
        else {
          if (r.error.retryable) p.push('the failure is marked retryable; a 4xx refusal is permanent');
          if (r.tries !== 1) p.push(`the result says tries=${r.tries}, not 1`);
          if (r.error.effect !== 'none') p.push(`error.effect is ${r.error.effect ?? 'absent (unknown)'}, not none: the service refused the call`);
          p.push(...circuitHint(r));
        }
        return verdict(p);
      },
    });
  }

  {
    const taskId = 'conf-throttled';
    add({
      name: 'throttled',
      title: 'the service throttles (429, Retry-After: 2): the attempt ends at once, no further call, one result throttled with retryAfterMs 2000, tries 1, effect none (§8.7; decision 0020)',
      taskId,
      requests: [{ value: stepRequest(ctx, taskId, { retry: { maxAttempts: 5, initialDelayMs: 50, maxDelayMs: 200 } }), msgId: msgIdOf(taskId, 'run', 1) }],
      scripts: [[runKey(ctx, taskId), [{ kind: 'throttle', status: 429, retryAfter: '2' }, { kind: 'ok' }]]],
      // Long enough after the result that a second call inside the Retry-After would have been seen.
      judgeAfterMs: 2_500,
      judge: (o) => {
        const p = [...resultProblems(o, taskId, 'run', [1]), ...keyProblems(o, runKey(o.ctx, taskId), '/apply'), ...ackProblems(o)];
        if (o.calls.length !== 1) p.push(`the service saw ${o.calls.length} calls; after a 429 the attempt must end at once, with no further call (retry.maxAttempts was 5)`);
        const r = exactlyOne(o);
        if (typeof r === 'string') p.push(r);
        else if (r.ok) p.push('the result is ok; the service answered 429 (the agent called it again inside the attempt?)');
        else {
          if (r.error.throttled !== true) p.push(`error.throttled is ${String(r.error.throttled ?? 'absent')}, not true: a 429 is a throttle`);
          if (r.error.retryAfterMs !== 2_000) p.push(`error.retryAfterMs is ${String(r.error.retryAfterMs ?? 'absent')}, not 2000 (Retry-After: 2 is seconds)`);
          if (!r.error.retryable) p.push('the failure is not retryable; a throttle is');
          if (r.tries !== 1) p.push(`the result says tries=${r.tries}, not 1`);
          if (r.error.effect !== 'none') p.push(`error.effect is ${r.error.effect ?? 'absent (unknown)'}, not none: the service refused the call`);
          p.push(...circuitHint(r));
        }
        return verdict(p);
      },
    });
  }

  {
    const taskId = 'conf-complete-by';
    const completeBy = ctx.t0 + 3_000;
    add({
      name: 'complete-by-reached',
      title: 'the service never answers: at complete-by the agent aborts the call, sends nothing, acknowledges the request; no redelivery (§8.6)',
      taskId,
      requests: [{ value: stepRequest(ctx, taskId, { completeBy }), msgId: msgIdOf(taskId, 'run', 1) }],
      scripts: [[runKey(ctx, taskId), [{ kind: 'hang' }]]],
      // Past complete-by plus a whole ack wait: a request left unacknowledged would have come back.
      judgeAfterMs: 3_000 + ACK_WAIT_MS + 1_500,
      judge: (o) => {
        const p = [...keyProblems(o, runKey(o.ctx, taskId), '/apply'), ...ackProblems(o)];
        if (o.results.length > 0) p.push(`${o.results.length} result(s) were sent; at complete-by the agent sends nothing back (not even an error)`);
        if (o.calls.length === 0) p.push('the service was never called');
        const late = o.calls.filter((c) => c.startedAt >= completeBy);
        if (late.length > 0) p.push(`${late.length} call(s) started after complete-by (a redelivery that was not dropped, or a retry past the window)`);
        const open = o.calls.filter((c) => c.ended === 'open');
        if (open.length > 0) p.push(`${open.length} call(s) still open ${o.judgedAt - completeBy} ms after complete-by: the call was not aborted`);
        const notes: string[] = [];
        for (const c of o.calls) if (c.ended === 'aborted' && c.endedAt !== undefined) notes.push(`call aborted ${c.endedAt - completeBy} ms after complete-by`);
        const acked = o.requests[0]?.ackedAt;
        if (acked !== undefined) notes.push(`request acknowledged ${acked - completeBy} ms after complete-by`);
        return verdict(p, notes);
      },
    });
  }

  {
    const taskId = 'conf-late';
    add({
      name: 'late-request',
      title: 'a request arrives after its complete-by: dropped (acknowledged, no call, no result) (§8.3)',
      taskId,
      requests: [{ value: stepRequest(ctx, taskId, { completeBy: ctx.t0 - 1_000, dispatchedAt: ctx.t0 - 6_000 }), msgId: msgIdOf(taskId, 'run', 1) }],
      judgeAfterMs: 0,
      judge: (o) => verdict([...noCallsNoResults(o, 'for a request past its complete-by'), ...ackProblems(o)]),
    });
  }

  {
    const taskId = 'conf-duplicate';
    const value = stepRequest(ctx, taskId);
    add({
      name: 'duplicate-delivery',
      title: 'the same attempt delivered twice: every call carries the request\'s idempotency key; every result has the attempt\'s message id (§8.5, §8.7)',
      taskId,
      requests: [
        { value, msgId: msgIdOf(taskId, 'run', 1, ':first') },
        { value, msgId: msgIdOf(taskId, 'run', 1, ':again') },
      ],
      scripts: [[runKey(ctx, taskId), [{ kind: 'slow', ms: 300 }]]],
      judgeAfterMs: 0,
      judge: (o) => {
        const p = [...resultProblems(o, taskId, 'run', [1]), ...keyProblems(o, runKey(o.ctx, taskId), '/apply'), ...ackProblems(o)];
        if (o.calls.length === 0) p.push('the service was never called');
        if (valid(o).length === 0) p.push('no valid result was sent');
        for (const r of valid(o)) if (!r.ok) p.push(`a result is a failure (${r.error.message}); the service answered 200`, ...circuitHint(r));
        return verdict(p, [`${o.calls.length} call(s), ${o.results.length} result message(s) stored (JetStream drops a repeated message id)`]);
      },
    });
  }

  {
    const taskId = 'conf-stale';
    add({
      name: 'stale-attempt',
      title: 'attempt 2, then a stale attempt 1 of the same step: each result reports its own attempt (the scheduler fences), the same idempotency key for both (§8)',
      taskId,
      requests: [
        { value: stepRequest(ctx, taskId, { attempt: 2 }), msgId: msgIdOf(taskId, 'run', 2) },
        { value: stepRequest(ctx, taskId, { attempt: 1 }), msgId: msgIdOf(taskId, 'run', 1) },
      ],
      judgeAfterMs: 0,
      judge: (o) => {
        const p = [...resultProblems(o, taskId, 'run', [1, 2]), ...keyProblems(o, runKey(o.ctx, taskId), '/apply'), ...ackProblems(o)];
        for (const attempt of [1, 2]) {
          const n = valid(o).filter((r) => r.attempt === attempt).length;
          if (n !== 1) p.push(`${n} valid results for attempt ${attempt}; expected one (a result reports the attempt of its request)`);
        }
        return verdict(p);
      },
    });
  }

  {
    const taskId = 'conf-keep-alive';
    const slowMs = ACK_WAIT_MS + 1_500;
    add({
      name: 'keep-alive',
      title: `a call longer than the ack wait (${slowMs} ms): the agent keeps the request with +WPI, so it is not redelivered to another instance; one call, one result (§8.4)`,
      taskId,
      requests: [{ value: stepRequest(ctx, taskId), msgId: msgIdOf(taskId, 'run', 1) }],
      scripts: [[runKey(ctx, taskId), [{ kind: 'slow', ms: slowMs }]]],
      judgeAfterMs: slowMs + 1_000,
      judge: (o) => {
        const p = [...resultProblems(o, taskId, 'run', [1]), ...keyProblems(o, runKey(o.ctx, taskId), '/apply'), ...ackProblems(o)];
        if (o.calls.length !== 1) p.push(`the service saw ${o.calls.length} calls: the request was redelivered while the first was still working (no +WPI progress acknowledgements?)`);
        const r = exactlyOne(o);
        if (typeof r === 'string') p.push(r);
        else if (!r.ok) p.push(`the result is a failure (${r.error.message}); the service answered 200 after ${slowMs} ms, inside the window`, ...circuitHint(r));
        return verdict(p);
      },
    });
  }

  {
    const taskId = 'conf-probe';
    const slowMs = 2_500;
    add({
      name: 'probe',
      title: `should: while it runs an attempt (a ${slowMs} ms call), the instance holding it answers a probe on triad.<ns>.probe.<agent> — once, on the probe's reply subject, with the attempt, its agent id, since and try — and no instance answers for an attempt it does not hold (decision 0021 §3.3; an agent that never answers is conformant)`,
      taskId,
      requests: [{ value: stepRequest(ctx, taskId), msgId: msgIdOf(taskId, 'run', 1) }],
      scripts: [[runKey(ctx, taskId), [{ kind: 'slow', ms: slowMs }]]],
      judgeAfterMs: slowMs + 1_000,
      probe: true,
      judge: (o) => {
        const p = [...resultProblems(o, taskId, 'run', [1]), ...keyProblems(o, runKey(o.ctx, taskId), '/apply'), ...ackProblems(o)];
        const r = exactlyOne(o);
        if (typeof r === 'string') p.push(r);
        const notes: string[] = [];
        const probes = o.probes;
        if (!probes?.sent) p.push('the kit never saw the call to probe during it');
        else {
          for (const a of [...probes.held, ...probes.other]) p.push(...a.problems.map((x) => `a probe answer: ${x}`));
          if (probes.other.length > 0) p.push(`${probes.other.length} answer(s) to a probe of attempt 2, which no instance holds: only the instance running an attempt answers`);
          const held = probes.held.flatMap((a) => (a.value ? [a.value] : []));
          if (probes.held.length === 0) notes.push('no instance answered the probe (allowed: answering is a should; triad status then says "no agent answered the probe")');
          if (probes.held.length > 1) p.push(`${probes.held.length} instances answered the probe; only the one holding the attempt may`);
          for (const h of held) {
            if (h.taskId !== taskId || h.step !== STEP || h.kind !== 'run' || h.attempt !== 1) p.push(`the probe answer names ${h.taskId}/${h.step} ${h.kind} attempt ${h.attempt}, not the probed ${taskId}/${STEP} run attempt 1`);
            if (h.try < 1) p.push(`the probe answer's try is ${h.try} while the call was held (the first try is 1)`);
            if (h.since < o.ctx.t0 - 1_000 || h.since > o.judgedAt) p.push(`the probe answer's since (${h.since}) is not when the agent took the request`);
          }
        }
        return verdict(p, notes);
      },
    });
  }

  {
    const taskId = 'conf-undo-applied';
    const undoes = runKey(ctx, taskId);
    const key = `${undoes}/compensate`;
    add({
      name: 'compensation-applied',
      title: 'a compensation of an applied step (effect applied, its output in needs): POST /undo with the request\'s key and of=undoes; one ok result of kind compensate (§8)',
      taskId,
      requests: [
        {
          value: stepRequest(ctx, taskId, { kind: 'compensate', idempotencyKey: key, undoes, effect: 'applied', needs: { [STEP]: { ref: 'applied-output' } }, input: { orderId: taskId, amount: 10 } }),
          msgId: msgIdOf(taskId, 'compensate', 1),
        },
      ],
      preApplied: [undoes],
      keys: [key, undoes],
      judgeAfterMs: 0,
      judge: (o) => {
        const p = [...resultProblems(o, taskId, 'compensate', [1]), ...keyProblems(o, key, '/undo', undoes), ...ackProblems(o)];
        if (o.calls.length === 0) p.push('the service was never called to undo');
        const r = exactlyOne(o);
        if (typeof r === 'string') p.push(r);
        else if (!r.ok) p.push(`the result is a failure (${r.error.message}); the undo was answered 200`, ...circuitHint(r));
        return verdict(p);
      },
    });
  }

  {
    const taskId = 'conf-undo-unknown';
    const undoes = runKey(ctx, taskId);
    const key = `${undoes}/compensate`;
    add({
      name: 'compensation-unknown',
      title: 'a compensation whose run may never have taken effect (effect unknown): the undo is still sent (the service leaves a tombstone) and reported ok (§8)',
      taskId,
      requests: [{ value: stepRequest(ctx, taskId, { kind: 'compensate', idempotencyKey: key, undoes, effect: 'unknown' }), msgId: msgIdOf(taskId, 'compensate', 1) }],
      keys: [key, undoes],
      judgeAfterMs: 0,
      judge: (o) => {
        const p = [...resultProblems(o, taskId, 'compensate', [1]), ...keyProblems(o, key, '/undo', undoes), ...ackProblems(o)];
        if (o.calls.length === 0) p.push('the service was never called to undo');
        const r = exactlyOne(o);
        if (typeof r === 'string') p.push(r);
        else if (!r.ok) p.push(`the result is a failure (${r.error.message}); the undo was answered 200`, ...circuitHint(r));
        return verdict(p);
      },
    });
  }

  {
    const taskId = 'conf-fan-out';
    const items = [{ sku: 'a' }, 'b'];
    const keyOf = (i: number): string => `${runKey(ctx, taskId)}/${i}`;
    add({
      name: 'fan-out',
      title: "two elements of a fan-out step (item, decision 0019): each called with its own key; each result echoes its item.index, with <step>#<index> in its message id (§8.2, §8.7)",
      taskId,
      requests: items.map((value, index) => ({
        value: stepRequest(ctx, taskId, { idempotencyKey: keyOf(index), item: { index, count: items.length, value } }),
        msgId: `${taskId}:${STEP}#${index}:run:1`,
      })),
      keys: items.map((_, i) => keyOf(i)),
      judgeAfterMs: 0,
      judge: (o) => {
        const p = [...resultProblems(o, taskId, 'run', [1]), ...ackProblems(o)];
        for (const c of o.calls) {
          if (c.path !== '/apply') p.push(`the agent called ${c.path}, not /apply`);
          if (!items.some((_, i) => c.idempotencyKey === keyOf(i))) p.push(`a call carried idempotencyKey ${JSON.stringify(c.idempotencyKey)}, not one of the elements' keys (the request's idempotencyKey)`);
        }
        items.forEach((_, i) => {
          if (!o.calls.some((c) => c.idempotencyKey === keyOf(i))) p.push(`element ${i} was never called with its key ${keyOf(i)}`);
          const mine = valid(o).filter((r) => r.item === i);
          if (mine.length !== 1) p.push(`${mine.length} results echo item ${i}; each element's result must echo its request's item.index, once`);
          else if (!mine[0]!.ok) p.push(`element ${i}'s result is a failure (${mine[0]!.error.message}); the service answered 200`, ...circuitHint(mine[0]!));
        });
        const unnamed = valid(o).filter((r) => r.item === undefined).length;
        if (unnamed > 0) p.push(`${unnamed} result(s) name no item: a fan-out element's result must echo item.index (the scheduler refuses it as stale otherwise)`);
        return verdict(p);
      },
    });
  }

  {
    // The input stored as an object (docs/protocol.md §12): the agent resolves the reference before it
    // calls the service, which then sees the order itself.
    const taskId = 'conf-input-ref';
    const client = 'conformance';
    const bytes = encode({ orderId: taskId, amount: 10 });
    const name = inputObjectName(taskId, 'kit1');
    const ref = objectRef(objectBucket(ctx.namespace, client), name, bytes.length, createHash('sha256').update(bytes).digest('hex'));
    add({
      name: 'input-reference',
      title: 'the input is an object reference: the agent reads the object (size and SHA-256 checked) and calls the service with the order it holds (§12)',
      taskId,
      objects: [{ client, name, bytes }],
      requests: [{ value: stepRequest(ctx, taskId, { input: ref }), msgId: msgIdOf(taskId, 'run', 1) }],
      judgeAfterMs: 0,
      judge: (o) => {
        const p = [...resultProblems(o, taskId, 'run', [1]), ...keyProblems(o, runKey(o.ctx, taskId), '/apply'), ...ackProblems(o)];
        const r = exactlyOne(o);
        if (typeof r === 'string') p.push(r);
        else if (!r.ok) p.push(`the result is a failure (${r.error.message}); the object holds a valid order`, ...circuitHint(r));
        if (o.calls.length !== 1) p.push(`the service saw ${o.calls.length} calls; expected one`);
        for (const c of o.calls) {
          const orderId = (c.body as { payload?: { orderId?: unknown } } | undefined)?.payload?.orderId;
          if (orderId !== taskId) p.push(`the call's payload.orderId is ${JSON.stringify(orderId)}, not the stored input's ${JSON.stringify(taskId)}: resolve input references before calling the service`);
        }
        return verdict(p);
      },
    });
  }

  {
    const taskId = 'conf-invalid';
    add({
      name: 'invalid-request',
      title: 'a request invalid by its schema: dead-lettered on triad.<ns>.dlq.step_<agent> with the reason and the original bytes, acknowledged, no call (§7, §8.2)',
      taskId,
      requests: [{ value: { taskId, step: STEP, agent: ctx.agent, kind: 'run', attempt: 'one' }, msgId: msgIdOf(taskId, 'run', 1) }],
      judgeAfterMs: 0,
      judge: (o) => verdict([...noCallsNoResults(o, 'for an invalid request'), ...deadLetterProblems(o), ...ackProblems(o)], o.deadLetters.map((d) => `reason: ${d.value?.reason ?? '?'}`)),
    });
  }

  {
    const taskId = 'conf-wrong-agent';
    add({
      name: 'wrong-agent',
      title: 'a request naming another agent type on this type\'s subject: dead-lettered, acknowledged, no call (§8.2)',
      taskId,
      requests: [{ value: stepRequest(ctx, taskId, { agent: `not${ctx.agent.slice(0, 40)}` }), msgId: msgIdOf(taskId, 'run', 1) }],
      judgeAfterMs: 0,
      judge: (o) => verdict([...noCallsNoResults(o, 'for a request meant for another agent type'), ...deadLetterProblems(o), ...ackProblems(o)], o.deadLetters.map((d) => `reason: ${d.value?.reason ?? '?'}`)),
    });
  }
  return cases;
}

function deadLetterProblems(o: CaseObservation): string[] {
  if (o.deadLetters.length === 0) return [`no dead letter on ${o.ctx.deadLetterSubject} carries the request's bytes`];
  const p: string[] = [];
  for (const d of o.deadLetters) {
    p.push(...d.problems.map((x) => `a dead letter: ${x}`));
    if (d.subject !== o.ctx.deadLetterSubject) p.push(`a dead letter came on ${d.subject}, not ${o.ctx.deadLetterSubject}`);
    if (d.value && d.value.source !== `step.${o.ctx.agent}`) p.push(`a dead letter's source is ${JSON.stringify(d.value.source)}, not "step.${o.ctx.agent}"`);
    if (d.value && d.value.reason.trim() === '') p.push("a dead letter's reason is empty");
  }
  return p;
}
