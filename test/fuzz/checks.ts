/**
 * The checks after a storm: each case's expectation against what Triad did — the dead letters (matched
 * by source and original bytes), the API replies, the `rejected` events on submitters' reply subjects —
 * and every dead letter accounted for.
 */
import { createHash } from 'node:crypto';
import { ApiReplySchema, ErrorCode, MAX_LISTED_ISSUES, StepRequestSchema, TaskEventBatchSchema, decode, unpackTrusted, type DeadLetter, type StepRequest } from '@triad/protocol';
import type { FuzzCase } from './cases.js';
import { acceptedTask, expectationOf, type ApiExpectation, type Context, type Expectation, type ExpectedDeadLetter } from './expectations.js';
import { isPlainObject } from './mutations.js';
import { judge, judgeStepRequests } from './oracle.js';
import type { Outcome } from './storm.js';

/** The checks, by name: every failure names one. */
export const CHECKS = {
  processes: 'every actor process still runs with the pid it started with, logged no crash, and kept its NATS connection',
  drained: 'every consumed stream was drained: each message acknowledged or dead-lettered',
  deadLettered: 'every invalid message on a stream is in the dead-letter stream with its original bytes',
  reason: "every dead letter's reason says what the schema says: the field path, not-msgpack, or the size limit",
  schemaNamesField: "the schema's own verdict names the field a mutation touched",
  consumed: 'valid but meaningless messages are consumed without a dead letter where the code acknowledges them',
  unexpectedDeadLetter: 'every dead letter is accounted for by a message the fuzzer sent',
  apiReply: 'every API request got a reply: an error naming the field for an invalid one, the expected answer for a valid one',
  rejectedEvent: 'a refused submission whose reply subject can be read gets a `rejected` event with the reason there',
  refused: 'NATS refuses only messages over its own limits',
  tasks: 'every accepted submission reaches a terminal state',
  afterStorm: 'a valid orders task submitted after the storm completes',
} as const;
export type CheckName = keyof typeof CHECKS;

export interface Failure {
  check: CheckName;
  /** The case, when the failure is about one. */
  caseId?: number;
  target?: string;
  category?: string;
  detail: string;
}

export interface CaseCheckInput {
  cases: readonly FuzzCase[];
  outcomes: ReadonlyMap<number, Outcome>;
  deadLetters: readonly DeadLetter[];
  replies: ReadonlyMap<string, readonly Uint8Array[]>;
  registry: Context['registry'];
  /** The storming client's inbox prefix: the scheduler answers only reply subjects under it. */
  inbox: string;
  /** Whether NATS accepts a message of this size on the case's subject. */
  fitsTransport: (c: FuzzCase) => boolean;
}

export interface CaseCheckResult {
  failures: Failure[];
  /** Task ids of accepted submissions (their end is checked by the caller). */
  tasks: string[];
  counts: {
    deadLettersExpected: number;
    deadLettersFound: number;
    /** Dead letters stored twice for one message (redelivered before its termination reached the server). */
    deadLetterRepeats: number;
    consumed: number;
    apiErrors: number;
    apiOk: number;
    refusedByNats: number;
    rejectedEvents: number;
  };
}

const hash = (b: Uint8Array): string => createHash('sha1').update(b).digest('hex');
const clip = (s: string, n = 300): string => (s.length > n ? `${s.slice(0, n)}…` : s);

function about(c: FuzzCase): Pick<Failure, 'caseId' | 'target' | 'category'> {
  return { caseId: c.id, target: c.target.name, category: c.draft.category };
}

/** The dead letters, by source and original bytes, each to be claimed by one expectation. */
class DeadLetterIndex {
  private readonly byKey = new Map<string, { dl: DeadLetter; used: boolean }[]>();
  private readonly claimedKeys = new Set<string>();

  constructor(dls: readonly DeadLetter[]) {
    for (const dl of dls) {
      const key = `${dl.source}|${hash(dl.original)}`;
      this.byKey.set(key, [...(this.byKey.get(key) ?? []), { dl, used: false }]);
    }
  }

  /** Claims the dead letter of these bytes whose reason passes, else any of these bytes (to report its reason). */
  claim(e: ExpectedDeadLetter): { dl: DeadLetter; problem?: string } | undefined {
    const key = `${e.source}|${hash(e.bytes)}`;
    const free = (this.byKey.get(key) ?? []).filter((x) => !x.used);
    const pick = free.find((x) => e.rule(x.dl.reason) === undefined) ?? free[0];
    if (!pick) return undefined;
    pick.used = true;
    this.claimedKeys.add(key);
    const problem = e.rule(pick.dl.reason);
    return problem === undefined ? { dl: pick.dl } : { dl: pick.dl, problem };
  }

  /**
   * Dead letters no expectation claimed, and how many of them repeat a claimed one: a message redelivered
   * before its termination reached the server is dead-lettered again (delivery is at least once).
   */
  unclaimed(): { entries: DeadLetter[]; repeats: number } {
    let repeats = 0;
    const entries: DeadLetter[] = [];
    for (const [key, list] of this.byKey) {
      for (const x of list.filter((y) => !y.used)) {
        if (this.claimedKeys.has(key)) repeats++;
        else entries.push(x.dl);
      }
    }
    return { entries, repeats };
  }
}

function checkApi(c: FuzzCase, outcome: Outcome, want: ApiExpectation, counts: CaseCheckResult['counts']): Failure[] {
  if (outcome.kind !== 'reply') return [{ check: 'apiReply', ...about(c), detail: `no reply (${outcome.kind === 'published' ? 'published' : outcome.error}); expected ${want.outcome}: ${want.why}` }];
  const d = decode(outcome.data, ApiReplySchema, 'API reply', Number.MAX_SAFE_INTEGER);
  if (!d.ok) return [{ check: 'apiReply', ...about(c), detail: `the reply is not an ApiReply: ${d.error.message}` }];
  const r = d.value;
  if (r.ok) {
    counts.apiOk++;
    return want.outcome === 'ok' || want.outcome === 'any' ? [] : [{ check: 'apiReply', ...about(c), detail: `answered ok; expected error ${want.outcome}: ${want.why}` }];
  }
  counts.apiErrors++;
  if (want.outcome === 'any' && r.error.code !== ErrorCode.Internal) return [];
  if (r.error.code !== want.outcome) return [{ check: 'apiReply', ...about(c), detail: `answered ${r.error.code} "${clip(r.error.message)}"; expected ${want.outcome}: ${clip(want.why)}` }];
  const problem = want.rule?.(r.error.message);
  if (problem) return [{ check: 'reason', ...about(c), detail: `API error "${clip(r.error.message)}" ${problem}` }];
  // Replies list at most MAX_LISTED_ISSUES problems, each possibly clipped: compare what is listed by its start.
  const listed = (d: string): boolean => (r.error.details ?? []).some((x) => x === d || d.startsWith(x.slice(0, 200)));
  const missing = (want.details ?? []).slice(0, MAX_LISTED_ISSUES).filter((x) => !listed(x));
  if (missing.length > 0) return [{ check: 'apiReply', ...about(c), detail: `the error's details lack ${missing.map((m) => JSON.stringify(m)).join(', ')}` }];
  return [];
}

/**
 * The scheduler answers a submission it cannot accept on the reply subject it names, when it can read
 * a task id and a reply subject from it (even from an invalid one). Deep values are left out: whether
 * they decode at all depends on the decoding process' stack.
 */
function replyReadable(c: FuzzCase): boolean {
  if (c.target.kind !== 'submit' || c.draft.category === 'deep') return false;
  try {
    const raw = unpackTrusted(c.bytes);
    return isPlainObject(raw) && typeof raw['taskId'] === 'string' && raw['replyTo'] === c.replyTo;
  } catch {
    return false;
  }
}

function checkRejected(
  c: FuzzCase,
  e: Expectation,
  replies: ReadonlyMap<string, readonly Uint8Array[]>,
  counts: CaseCheckResult['counts'],
  sameTask: (taskId: string) => readonly FuzzCase[],
): Failure[] {
  const eventsAt = (replyTo: string) =>
    (replies.get(replyTo) ?? []).flatMap((b) => {
      const d = decode(b, TaskEventBatchSchema, 'task events');
      return d.ok ? d.value.events : [];
    });
  const events = eventsAt(c.replyTo);
  if (e.task !== undefined) {
    if (events.length > 0) return [];
    // The same task id submitted by several cases (the generator's ids can repeat): the one that arrived
    // first created the task and gets its events; the others are duplicates, acknowledged without events.
    const answered = sameTask(e.task).some((other) => other !== c && eventsAt(other.replyTo).length > 0);
    return answered ? [] : [{ check: 'rejectedEvent', ...about(c), detail: `the accepted task ${e.task} sent no event to its reply subject` }];
  }
  const rejected = events.find((ev) => ev.type === 'rejected');
  if (!rejected) return [{ check: 'rejectedEvent', ...about(c), detail: `no rejected event on ${c.replyTo} (${(replies.get(c.replyTo) ?? []).length} messages there)` }];
  counts.rejectedEvents++;
  const problem = e.deadLetters[0]?.rule(rejected.reason ?? '');
  return problem ? [{ check: 'reason', ...about(c), detail: `the rejected event's reason "${clip(rejected.reason ?? '')}" ${problem}` }] : [];
}

export function checkCases(input: CaseCheckInput): CaseCheckResult {
  const counts: CaseCheckResult['counts'] = { deadLettersExpected: 0, deadLettersFound: 0, deadLetterRepeats: 0, consumed: 0, apiErrors: 0, apiOk: 0, refusedByNats: 0, rejectedEvents: 0 };
  const failures: Failure[] = [];
  const tasks: string[] = [];
  const index = new DeadLetterIndex(input.deadLetters);
  const consumedCases = new Map<string, FuzzCase>();
  const ctx: Context = { registry: input.registry, inbox: input.inbox, accepted: new Set(input.cases.flatMap((c) => acceptedTask(c, input.registry, input.inbox) ?? [])) };
  const acceptedBy = new Map<string, FuzzCase[]>();
  for (const c of input.cases) {
    const taskId = acceptedTask(c, input.registry, input.inbox);
    if (taskId !== undefined && replyReadable(c)) acceptedBy.set(taskId, [...(acceptedBy.get(taskId) ?? []), c]);
  }
  for (const c of input.cases) {
    const outcome = input.outcomes.get(c.id);
    if (!outcome) {
      failures.push({ check: 'apiReply', ...about(c), detail: 'the storm recorded no outcome for this case' });
      continue;
    }
    if (outcome.kind === 'refused') {
      if (input.fitsTransport(c)) failures.push({ check: 'refused', ...about(c), detail: `NATS refused a ${c.bytes.length}-byte message within its limits: ${outcome.error}` });
      else counts.refusedByNats++;
      continue;
    }
    const e = expectationOf(c, ctx);
    for (const p of e.verdictProblems) failures.push({ check: 'schemaNamesField', ...about(c), detail: p });
    if (c.target.transport === 'request') {
      if (e.api) failures.push(...checkApi(c, outcome, e.api, counts));
      continue;
    }
    if (e.task !== undefined) tasks.push(e.task);
    if (e.consumed) {
      counts.consumed++;
      consumedCases.set(`${c.target.kind === 'step' || c.target.kind === 'step-batch' ? c.target.source : c.target.name}|${hash(c.bytes)}`, c);
    }
    for (const want of e.deadLetters) {
      counts.deadLettersExpected++;
      const got = index.claim(want);
      if (!got && want.optional) counts.deadLettersExpected--;
      else if (!got) failures.push({ check: 'deadLettered', ...about(c), detail: `not dead-lettered on ${want.source}: ${clip(want.why)}` });
      else {
        counts.deadLettersFound++;
        if (got.problem) failures.push({ check: 'reason', ...about(c), detail: `dead letter reason "${clip(got.dl.reason)}" ${got.problem}` });
      }
    }
    if (replyReadable(c)) failures.push(...checkRejected(c, e, input.replies, counts, (taskId) => acceptedBy.get(taskId) ?? []));
  }
  const left = index.unclaimed();
  counts.deadLetterRepeats = left.repeats;
  // An agent runs a valid step request it is sent (it holds no state to check the task against:
  // decision 0010), so the result of one for a task that does not exist comes back as a result the
  // scheduler dead-letters ("no such task") — or "no such step" when another case's submission created
  // a task of that id (a near-miss id like "null" can be both). Those are accounted for by the step
  // request cases.
  const ranTasks = new Set(
    [...consumedCases.values()].flatMap((c) => {
      if (c.target.kind === 'step-batch') {
        const r = judgeStepRequests(c.bytes);
        return 'items' in r ? r.items.flatMap((i) => (i.verdict.valid ? [(i.verdict.value as StepRequest).taskId] : [])) : [];
      }
      if (c.target.kind !== 'step') return [];
      const v = judge(c.bytes, StepRequestSchema, 'step request');
      return v.valid ? [(v.value as StepRequest).taskId] : [];
    }),
  );
  for (const dl of left.entries) {
    const ran = /^result for ([^/]+)\/[^:]*: no such (?:task|step)/.exec(dl.reason)?.[1];
    if (dl.source === 'result' && ran !== undefined && ranTasks.has(ran)) continue;
    const valid = consumedCases.get(`${dl.source}|${hash(dl.original)}`);
    failures.push(
      valid
        ? { check: 'consumed', ...about(valid), detail: `a valid message the code acknowledges was dead-lettered: "${clip(dl.reason)}"` }
        : { check: 'unexpectedDeadLetter', detail: `on ${dl.source} (${dl.original.length} bytes, ${dl.deliveries} deliveries): "${clip(dl.reason)}"` },
    );
  }
  return { failures, tasks: [...new Set(tasks)], counts };
}
