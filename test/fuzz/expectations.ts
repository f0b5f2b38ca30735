/**
 * What Triad must do with each case, derived from the oracle's verdict and from what the consuming code
 * does with a valid but meaningless message: dead-letter it (with a reason that names the field), consume
 * it without a dead letter, run it as a task, or answer the API request with a given error.
 */
import { validateDefinition } from '@triad/core';
import { scheduleTiming } from '@triad/scheduler';
import {
  ErrorCode,
  StepRequestSchema,
  SubmissionSchema,
  SupervisorCommandSchema,
  isTriadError,
  type StepRequest,
  type Submission,
} from '@triad/protocol';
import type { FuzzCase } from './cases.js';
import type { Placement } from './generators.js';
import { pathText, type Mutation } from './mutations.js';
import { judge, judgeResults, namedPaths, type Verdict } from './oracle.js';

type Invalid = Extract<Verdict, { valid: false }>;
type Change = Mutation | Placement;

/** A reason is checked against this; the answer is what is wrong with it, or undefined. */
export type ReasonRule = (reason: string) => string | undefined;

export interface ExpectedDeadLetter {
  source: string;
  bytes: Uint8Array;
  rule: ReasonRule;
  /** May instead be acknowledged (a message about a task the storm itself created). */
  optional?: boolean;
  /** What the expectation rests on, for the failure message. */
  why: string;
}

export interface ApiExpectation {
  /** `ok`, the error code the reply must carry, or `any` answer but an internal error. */
  outcome: 'ok' | 'any' | ErrorCode;
  rule?: ReasonRule;
  /** For an invalid definition: the problems the reply must list. */
  details?: readonly string[];
  why: string;
}

export interface Expectation {
  deadLetters: ExpectedDeadLetter[];
  /** A valid message that is consumed (acknowledged) without a dead letter. */
  consumed: boolean;
  /** A submission that is accepted: its task must end. */
  task?: string;
  api?: ApiExpectation;
  /** Problems with the schema's own verdict (it does not name the field a mutation touched). */
  verdictProblems: string[];
}

/**
 * The phrase a rejection opens with after the message name (`is not valid msgpack`, `is invalid`):
 * what a process's reason must say too, whatever detail the decoder adds in brackets.
 */
function phrase(message: string): string {
  const from = message.indexOf(' is ');
  const rest = from < 0 ? message : message.slice(from + 1);
  return rest.split(/ \(|[:;]/)[0]!.trim();
}

/** A reason must say what the oracle said: the size limit, not-msgpack, or every field the schema names. */
export function verdictRule(v: Invalid): ReasonRule {
  if (v.kind === 'schema') {
    const paths = namedPaths(v.details);
    return (reason) => {
      const missing = paths.filter((p) => !reason.includes(p));
      return missing.length === 0 ? undefined : `does not name ${missing.join(', ')} (the schema's verdict: ${v.details.join('; ')})`;
    };
  }
  const words = phrase(v.message);
  return (reason) => (reason.includes(words) ? undefined : `does not say "${words}" (the oracle's verdict: ${v.message})`);
}

export function includesRule(...parts: string[]): ReasonRule {
  return (reason) => {
    const missing = parts.filter((p) => !reason.includes(p));
    return missing.length === 0 ? undefined : `does not mention ${missing.map((m) => JSON.stringify(m)).join(', ')}`;
  };
}

/**
 * Whether a schema verdict names the field a change touched: the field's path (or a field inside it);
 * for an added field, its name; for a dropped array element, its array; a change of the whole message
 * is named by any field.
 */
export function namesChange(details: readonly string[], change: Change): boolean {
  if (change.path.length === 0) return true;
  const added = change.kind === 'extra-field' || ('added' in change && change.added);
  const names = (path: readonly (string | number)[]): boolean => details.some((d) => d.startsWith(`${pathText(path)}:`) || d.startsWith(`${pathText(path)}.`));
  if (added && details.some((d) => d.includes(`"${String(change.path[change.path.length - 1])}"`))) return true;
  if (change.kind === 'drop' && typeof change.path[change.path.length - 1] === 'number' && names(change.path.slice(0, -1))) return true;
  return names(change.path);
}

function verdictProblems(v: Verdict, change: Change | undefined, skip = false): string[] {
  if (v.valid || v.kind !== 'schema' || !change || skip || namesChange(v.details, change)) return [];
  return [`the schema's verdict does not name ${pathText(change.path)} (changed: ${change.kind}): ${v.details.join('; ')}`];
}

function deadLetter(source: string, bytes: Uint8Array, v: Invalid, why: string): ExpectedDeadLetter {
  return { source, bytes, rule: verdictRule(v), why: `${why}: ${v.message}` };
}

const none = (): Expectation => ({ deadLetters: [], consumed: false, verdictProblems: [] });

export interface Context {
  /** Registered workflows before the storm: name → versions. */
  registry: ReadonlyMap<string, readonly number[]>;
  /**
   * Tasks the storm's own valid submissions created. A mutated task id elsewhere can name one of them
   * (a short id like "0" is as likely in a submission as in a result), so messages about them may be
   * applied, stale or refused for another reason than an unknown task.
   */
  accepted: ReadonlySet<string>;
  /** The submitting client's inbox prefix: a reply subject outside it is refused (decision 0010). */
  inbox: string;
}

/** The task a submission case creates, if it is valid and names a registered workflow and version. */
export function acceptedTask(c: FuzzCase, registry: Context['registry'], inbox: string): string | undefined {
  if (c.target.kind !== 'submit') return undefined;
  const v = judge(c.bytes, SubmissionSchema, 'submission');
  if (!v.valid) return undefined;
  const sub = v.value as Submission;
  if (sub.replyTo !== undefined && !sub.replyTo.startsWith(`${inbox}.`)) return undefined;
  const versions = registry.get(sub.workflow);
  return versions && (sub.version === undefined || versions.includes(sub.version)) ? sub.taskId : undefined;
}

function submitExpectation(c: FuzzCase, registry: Context['registry'], inbox: string): Expectation {
  const v = judge(c.bytes, SubmissionSchema, 'submission');
  const e = none();
  e.verdictProblems = verdictProblems(v, c.draft.change);
  if (!v.valid) {
    e.deadLetters.push(deadLetter('submit', c.bytes, v, 'invalid submission'));
    return e;
  }
  const sub = v.value as Submission;
  if (sub.replyTo !== undefined && !sub.replyTo.startsWith(`${inbox}.`)) {
    e.deadLetters.push({ source: 'submit', bytes: c.bytes, rule: includesRule('replyTo', 'is not in client'), why: `valid submission whose replyTo "${sub.replyTo}" is outside the client's inbox` });
    return e;
  }
  const versions = registry.get(sub.workflow);
  if (versions && (sub.version === undefined || versions.includes(sub.version))) {
    e.task = sub.taskId;
    return e;
  }
  const parts = [`"${sub.workflow}"`, ...(versions && sub.version !== undefined ? [`version ${sub.version}`] : [])];
  e.deadLetters.push({ source: 'submit', bytes: c.bytes, rule: includesRule(...parts), why: `valid submission of an unregistered workflow or version (${parts.join(' ')})` });
  return e;
}

function stepExpectation(c: FuzzCase, agent: string, source: string): Expectation {
  const v = judge(c.bytes, StepRequestSchema, `step request for agent ${agent}`);
  const e = none();
  e.verdictProblems = verdictProblems(v, c.draft.change);
  if (!v.valid) e.deadLetters.push(deadLetter(source, c.bytes, v, 'invalid step request'));
  else if ((v.value as StepRequest).agent !== agent) {
    const named = (v.value as StepRequest).agent;
    e.deadLetters.push({ source, bytes: c.bytes, rule: includesRule(`"${named}"`), why: `valid step request naming agent "${named}" on ${agent}'s subject` });
  } else {
    // Dropped on arrival past its complete-by, else run (an agent holds no state to check the task
    // against, decision 0010): either way acknowledged; a result for a task that does not exist comes
    // back and is dead-lettered by the scheduler (accounted for in checks.ts).
    e.consumed = true;
  }
  return e;
}

function resultExpectation(c: FuzzCase, accepted: Context['accepted']): Expectation {
  const r = judgeResults(c.bytes);
  const e = none();
  if ('whole' in r) {
    // A batch that lost its `results` is read as a single result (decodeResults tells them apart by that
    // key), so its verdict names the single result's fields, not `results`.
    const readAsSingle = c.draft.change?.kind === 'drop' && c.draft.change.path.length === 1 && c.draft.change.path[0] === 'results';
    e.verdictProblems = verdictProblems(r.whole, c.draft.change, readAsSingle);
    if (!r.whole.valid) e.deadLetters.push(deadLetter('result', c.bytes, r.whole, 'invalid results message'));
    return e;
  }
  r.items.forEach((item, i) => {
    const change = c.draft.category === 'batch' ? c.draft.items?.[i]?.change : r.items.length === 1 ? c.draft.change : undefined;
    e.verdictProblems.push(...verdictProblems(item.verdict, change));
    if (!item.verdict.valid) e.deadLetters.push(deadLetter('result', item.bytes, item.verdict, `invalid result ${i + 1} of ${r.items.length}`));
    else {
      const { taskId } = item.verdict.value as { taskId: string };
      // applyResult refuses a result for a task that does not exist (UNKNOWN_TASK): dead-lettered.
      if (!accepted.has(taskId)) e.deadLetters.push({ source: 'result', bytes: item.bytes, rule: includesRule('no such task', taskId), why: `valid result for task ${taskId}, which does not exist` });
      else e.deadLetters.push({ source: 'result', bytes: item.bytes, rule: includesRule(taskId), optional: true, why: `valid result for the storm's own task ${taskId}` });
    }
  });
  return e;
}

function commandExpectation(c: FuzzCase): Expectation {
  const v = judge(c.bytes, SupervisorCommandSchema, 'supervisor command');
  const e = none();
  e.verdictProblems = verdictProblems(v, c.draft.change);
  if (!v.valid) e.deadLetters.push(deadLetter('command', c.bytes, v, 'invalid supervisor command'));
  // A retry for a task that is not in flight is stale: acknowledged, logged at debug.
  else e.consumed = true;
  return e;
}

function apiExpectation(c: FuzzCase, { registry, accepted }: Context): Expectation {
  const e = none();
  const t = c.target;
  if (t.kind === 'api-unknown') {
    e.api = { outcome: ErrorCode.InvalidMessage, rule: includesRule('unknown API operation'), why: 'a request on a subject that is no API operation' };
    return e;
  }
  if (t.kind !== 'api') return e;
  const v = judge(c.bytes, t.schema, `${t.op} request`);
  e.verdictProblems = verdictProblems(v, c.draft.change);
  if (!v.valid) {
    e.api = { outcome: v.kind === 'oversize' ? ErrorCode.PayloadTooLarge : ErrorCode.InvalidMessage, rule: verdictRule(v), why: `invalid ${t.op} request: ${v.message}` };
    return e;
  }
  const q = v.value as { taskId?: string; name?: string; version?: number; definition?: unknown; opId?: string };
  switch (t.op) {
    case 'task.get':
    case 'task.retry':
    case 'task.cancel':
    case 'task.signal':
      if (accepted.has(q.taskId!)) e.api = { outcome: 'any', why: `a ${t.op} request for the storm's own task ${q.taskId}` };
      else e.api = { outcome: ErrorCode.UnknownTask, rule: includesRule(q.taskId!), why: `valid ${t.op} request for task ${q.taskId}, which does not exist` };
      break;
    case 'workflow.get': {
      const versions = registry.get(q.name!);
      const known = versions !== undefined && (q.version === undefined || versions.includes(q.version));
      e.api = known ? { outcome: 'ok', why: `workflow ${q.name} is registered` } : { outcome: ErrorCode.UnknownWorkflow, rule: includesRule(`"${q.name}"`), why: `workflow ${q.name} is not registered` };
      break;
    }
    case 'schedule.create': {
      // The timing is checked first (the scheduler's own function), then the workflow.
      const sq = v.value as { workflow: string; version?: number; every?: number | string; cron?: string; timezone?: string };
      try {
        scheduleTiming(sq);
        const versions = registry.get(sq.workflow);
        const known = versions !== undefined && (sq.version === undefined || versions.includes(sq.version));
        e.api = known ? { outcome: 'any', why: `schedule of registered workflow ${sq.workflow}` } : { outcome: ErrorCode.UnknownWorkflow, rule: includesRule(`"${sq.workflow}"`), why: `a schedule of workflow ${sq.workflow}, which is not registered` };
      } catch (err) {
        if (!isTriadError(err)) throw err;
        e.api = { outcome: err.code, rule: includesRule(err.message), why: `a schedule whose timing is refused: ${err.message}` };
      }
      break;
    }
    case 'schedule.get':
    case 'schedule.pause':
    case 'schedule.resume':
    case 'schedule.delete':
      e.api = { outcome: ErrorCode.UnknownSchedule, rule: includesRule(`"${q.name}"`), why: `valid ${t.op} request for schedule ${q.name}, which does not exist` };
      break;
    // The fuzzer's bulk requests name an operation that never starts (targets.ts): refused with the reason.
    case 'bulk.apply':
    case 'bulk.checkpoint':
    case 'bulk.end':
    case 'bulk.get':
      e.api = { outcome: ErrorCode.InvalidState, rule: includesRule(`no bulk operation ${String(q.opId)}`), why: `valid ${t.op} request for operation ${String(q.opId)}, which never started` };
      break;
    // Reads of buckets that are not the storm namespace's (targets.ts): refused with the reason.
    case 'payload.get':
      e.api = { outcome: ErrorCode.InvalidMessage, rule: includesRule('is not an object store bucket of namespace'), why: 'a payload.get of a bucket outside the namespace' };
      break;
    // An upload's part is stored; a last part whose count does not match what is stored is refused: either.
    case 'payload.put':
      e.api = { outcome: 'any', why: 'a part of a small upload (its last part may not match what is stored)' };
      break;
    case 'workflow.register':
      // The definition inside is judged by its own schema and graph checks (@triad/core's validateDefinition).
      try {
        validateDefinition(q.definition);
        e.api = { outcome: 'ok', why: 'a valid definition' };
      } catch (err) {
        if (!isTriadError(err)) throw err;
        e.api = { outcome: err.code, details: err.details, why: `an invalid definition: ${err.message}` };
      }
      break;
    default:
      e.api = { outcome: 'ok', why: `valid ${t.op} request` };
  }
  return e;
}

export function expectationOf(c: FuzzCase, ctx: Context): Expectation {
  const t = c.target;
  switch (t.kind) {
    case 'submit':
      return submitExpectation(c, ctx.registry, ctx.inbox);
    case 'step':
      return stepExpectation(c, t.agent, t.source);
    case 'result':
      return resultExpectation(c, ctx.accepted);
    case 'command':
      return commandExpectation(c);
    case 'api':
    case 'api-unknown':
      return apiExpectation(c, ctx);
  }
}
