// Runs one operation of the model-based test against the real transitions and the model, then checks
// that they agree (the outcome, what was dispatched, the whole state) and that the invariants hold.
import { isDeepStrictEqual } from 'node:util';
import type { Redis } from 'ioredis';
import { encode, ErrorCode, TriadError } from '@triad/protocol';
import { BUCKETS, bucketOf, type Dispatch as RealDispatch } from '../../src/index.js';
import { expectedAgent, Model, okOutput, type Dispatch, type Outcome, type ResultOutcome, type StepM, type TaskM } from './model.js';
import { SIGNAL_NAMES, attemptKey, resolve, type AppliedResult, type Op, type World } from './ops.js';
import { KID_SHAPE, modelSpec, realPlan, taskInput, type PlanChoice } from './plans.js';
import { readDeadlines, readTask, realSystem, snapshot, type RealSystem, type RealTask } from './real.js';
import { compareState } from './compare.js';
import { checkInvariants } from './invariants.js';
import { count, countStates } from './coverage.js';

export const T0 = 1_700_000_000_000;

export interface Env extends World {
  sys: RealSystem;
  /** Every operation run so far (for the failure message). */
  log: string[];
  /** The real tasks as read after the last transition. */
  last: Map<string, RealTask>;
  /** The type of the operation running (for the coverage counts). */
  current: string;
  /** Every alert the store has raised so far, by id (its JSON): an id is unique per give-up (decision 0009 §4). */
  raised: Map<string, string>;
  /** Each submitted task's plan choice (its child steps' workflow takes its ladders). */
  choices: Map<string, PlanChoice>;
}

/** A fresh namespace and model. */
export async function newEnv(redis: Redis, namespace: string, limited: readonly string[] = [], admission = false): Promise<Env> {
  const sys = await realSystem(redis, namespace, limited);
  // Admission (decision 0024): a share of 1 per bucket, and submitted tasks' ids all in bucket 0, so a
  // client's second task waits for its first.
  const model = new Model(T0, limited, admission ? 1 : 0, bucketOf);
  // The first supervisor leader holds epoch 1.
  await sys.store.fenceBuckets(model.epoch);
  return { model, visible: new Set(), history: [], sys, log: [], last: new Map(), current: '', raised: new Map(), choices: new Map() };
}

/** The client id of a submission's client number. */
export function clientId(n: number | undefined): string {
  return `client-${n ?? 0}`;
}

export class Mismatch extends Error {
  override name = 'Mismatch';
}

function fail(env: Env, what: string): never {
  throw new Mismatch(`${what}\n  after the operations (last one failed):\n    ${env.log.join('\n    ')}`);
}

/** A transition's outcome on the real side, in the model's terms. */
interface RealOutcome {
  code: Outcome['code'];
  dispatch: RealDispatch[];
  action?: string;
  /** The task's client as the transition returned it (its events go out under it, decision 0010). */
  client?: string;
}

async function realCall(call: () => Promise<RealOutcome>): Promise<RealOutcome> {
  try {
    return await call();
  } catch (e) {
    if (e instanceof TriadError && e.code === ErrorCode.Stale) return { code: 'stale_epoch', dispatch: [] };
    if (e instanceof TriadError && (e.code === ErrorCode.InvalidState || e.code === ErrorCode.UnknownStep)) return { code: 'invalid', dispatch: [] };
    throw e;
  }
}

function dispatchKey(d: { step: string; agent: string; kind: string; attempt: number; completeBy: number; effect?: string | undefined; count?: number | undefined; child?: string | undefined; childId?: string | undefined; sent?: number | undefined }): string {
  const child = d.child !== undefined ? `|child ${d.child} ${d.childId ?? '?'} sent ${d.sent ?? '?'}` : '';
  return `${d.step}|${d.agent}|${d.kind}|#${d.attempt}|by ${d.completeBy}|${d.effect ?? '-'}${d.count !== undefined ? `|of ${d.count}` : ''}${child}`;
}

/** A fan-out element's phase is named `<step>#<i>` in the model; the store names its step and its item. */
function phaseName(d: RealDispatch): string {
  return d.item !== undefined ? `${d.step}#${d.item}` : d.step;
}

/** The step and the element a model phase name denotes (the store's applyResult takes them apart). */
function splitPhase(name: string): { step: string; item?: number } {
  const m = /^(.+)#(\d+)$/.exec(name);
  return m ? { step: m[1]!, item: Number(m[2]) } : { step: name };
}

function sameDispatch(env: Env, label: string, model: Dispatch[], real: RealDispatch[]): void {
  const m = model.map(dispatchKey).sort();
  const r = real.map((d) => dispatchKey({ ...d, step: phaseName(d) })).sort();
  if (!isDeepStrictEqual(m, r)) fail(env, `${label}: dispatched ${JSON.stringify(r)} but the model dispatched ${JSON.stringify(m)}`);
  // A compensation gets the step's (or the element's) own output only when its effect is known (decision
  // 0009 §3); the test's plans declare no `needs` for runs.
  for (const d of real) {
    const needs = d.kind === 'compensate' && d.effect === 'applied' ? [phaseName(d)] : [];
    if (!isDeepStrictEqual(d.needs, needs)) fail(env, `${label}: the request for ${d.step} (${d.kind}, effect ${d.effect ?? '-'}) needs ${JSON.stringify(d.needs)}, expected ${JSON.stringify(needs)}`);
  }
}

async function readAll(env: Env): Promise<Map<string, RealTask>> {
  const out = new Map<string, RealTask>();
  for (const id of env.model.tasks.keys()) out.set(id, await readTask(env.sys, id));
  return out;
}

/** The model follows the real system's pick between compensations the decision leaves tied, if it is one of them. */
function tieFromReal(after: Map<string, RealTask>): (t: TaskM, tied: StepM[]) => StepM {
  return (t, tied) => {
    count('compensations tied in the undo order');
    return tied.find((s) => after.get(t.id)?.recs.get(s.spec.name)?.status === 'compensating') ?? tied[0]!;
  };
}

/**
 * One transition of task `taskId` on both sides: the real call, then the model (told the real choice
 * among tied compensations), then the checks. A transition the model says wrote nothing must leave every
 * key as it was (but a stale or forged result's count).
 */
async function transition(env: Env, label: string, taskId: string, real: () => Promise<RealOutcome>, model: () => Outcome, publish: boolean): Promise<Outcome> {
  const before = await snapshot(env.sys);
  const r = await realCall(real);
  const after = await readAll(env);
  env.model.chooseTie = tieFromReal(after);
  const m = model();
  count(`${env.current} → ${m.code}${m.code === 'applied' && m.action ? ` ${m.action}` : ''}`);
  // A task the transition created is read once the model knows it too.
  for (const id of env.model.tasks.keys()) if (!after.has(id)) after.set(id, await readTask(env.sys, id));
  if (m.code !== r.code) fail(env, `${label}: the real transition answered ${r.code}${r.action ? ` (${r.action})` : ''} but the model says ${m.code}`);
  if (m.code === 'applied') {
    if (m.action !== undefined && m.action !== r.action) fail(env, `${label}: the real expiry's action is ${r.action} but the model's is ${m.action}`);
    const client = env.model.task(taskId).client;
    if (r.client !== client) fail(env, `${label}: the transition names client ${r.client ?? '(none)'} but task ${taskId} was submitted by ${client}`);
    sameDispatch(env, label, m.dispatch, r.dispatch);
    if (publish) for (const d of m.dispatch) if (d.child === undefined) env.visible.add(attemptKey(d.taskId, d.step, d.kind, d.attempt));
  } else {
    const now = await snapshot(env.sys);
    if (!isDeepStrictEqual(before, now)) {
      fail(env, `${label}: rejected (${m.code}) but it changed the store:\n      before ${JSON.stringify(before)}\n      after  ${JSON.stringify(now)}`);
    }
  }
  await check(env, label, after);
  // The scheduler applies the child operations it dispatched (decision 0019 §5.2); unpublished = lost.
  if (publish && m.code === 'applied') await applyChildOps(env, label, m.dispatch);
  return m;
}

/** How long after a parent's creation its children stay undoable, in the test (longer than any run). */
const HOLD_MS = 10_000_000;

/**
 * The runner plays the scheduler for child steps: each child operation a transition dispatched is
 * applied to the child on both sides (startChild, cancelChild, undoChild), compared, and what the child's
 * own transition dispatched is published (its steps become visible to agents).
 */
async function applyChildOps(env: Env, label: string, dispatch: Dispatch[]): Promise<void> {
  const { store } = env.sys;
  const model = env.model;
  for (const d of dispatch) {
    if (d.child === undefined || d.childId === undefined) continue;
    const parent = model.task(d.taskId);
    const spec = parent.steps.get(d.step)?.spec.child;
    if (!spec) fail(env, `${label}: a child operation for ${d.taskId}/${d.step}, which starts no child`);
    const childId = d.childId;
    const sub = `${label} → ${d.child} child ${childId}`;
    env.current = `child ${d.child}`;
    const now = model.clock;
    const hold = parent.createdAt + HOLD_MS;
    const link = { parentId: d.taskId, parentStep: d.step, kind: d.kind, attempt: d.attempt, holdUntil: hold };
    const mlink = { parent: d.taskId, step: d.step, kind: d.kind, attempt: d.attempt, holdUntil: hold };
    let real: { action: string; dispatch: RealDispatch[] };
    let m: { outcome: Outcome; action: string };
    if (d.child === 'start') {
      const r = await store.startChild({ lease: env.sys.taskLease(childId), childId, link, workflow: 'kid', version: 1, plan: realPlan(env.choices.get(d.taskId) ?? fail(env, `${sub}: no plan choice for ${d.taskId}`), KID_SHAPE).plan, onFailure: 'compensate', input: encode(parent.input), client: parent.client, now, schedulerId: 'model-scheduler' });
      real = r.applied ? { action: r.action, dispatch: r.transition.dispatch } : { action: 'exists', dispatch: [] };
      m = model.startChild(childId, parent.client, spec.spec, parent.input, mlink, now);
    } else {
      const r = await store.stopChild(d.child, { lease: env.sys.taskLease(childId), childId, link, workflow: 'kid', client: parent.client, reason: 'the parent stopped', now, schedulerId: 'model-scheduler' });
      real = { action: r.applied ? r.action : 'exists', dispatch: r.applied ? r.transition.dispatch : [] };
      m = model.stopChild(d.child, childId, parent.client, mlink, now);
    }
    count(`child ${d.child} → ${m.action}`);
    if (real.action !== m.action) fail(env, `${sub}: the store answered ${real.action}, the model ${m.action}`);
    const mDispatch = m.outcome.code === 'applied' ? m.outcome.dispatch : [];
    sameDispatch(env, sub, mDispatch, real.dispatch);
    for (const x of mDispatch) if (x.child === undefined) env.visible.add(attemptKey(x.taskId, x.step, x.kind, x.attempt));
    await check(env, sub, await readAll(env));
    await applyChildOps(env, sub, mDispatch);
  }
}

/**
 * The leader delivers child `childId`'s notice (takeParentNotice → childEnded → dropParentNotice) at
 * `epoch`; with `takeover`, a new leader fences every bucket between two of those steps, so the rest
 * is refused and the notice stays for the next leader.
 */
async function deliver(env: Env, label: string, childId: string, epoch: number, publish: boolean, takeover: 'none' | 'taken' | 'ended' = 'none'): Promise<void> {
  const model = env.model;
  const now = model.clock;
  let fenced = false;
  const between = async (stage: 'taken' | 'ended'): Promise<void> => {
    if (stage !== takeover) return;
    await env.sys.store.fenceBuckets(model.epoch + 1);
    fenced = true;
  };
  let real: Awaited<ReturnType<typeof env.sys.store.deliverNotice>> | 'stale_epoch';
  try {
    real = await env.sys.store.deliverNotice(childId, now, epoch, 5_000, between);
  } catch (e) {
    if (e instanceof TriadError && e.code === ErrorCode.Stale) real = 'stale_epoch';
    else throw e;
  }
  // The model, step by step, with the same takeover.
  const taken = model.takeNotice(childId, now, epoch);
  let expected: 'stale_epoch' | 'none' | Outcome = taken.code === 'deliver' ? { code: 'noop' } : taken.code;
  if (taken.code === 'deliver') {
    if (takeover === 'taken') model.epoch++;
    const ended = model.childEnded(taken.link, childId, taken.status, taken.output, now, epoch);
    expected = ended;
    if (ended.code !== 'stale_epoch') {
      if (takeover === 'ended') model.epoch++;
      if (model.dropNotice(childId, taken.score, `${taken.link.kind}:${taken.link.attempt}:${taken.status}`, epoch) === 'stale_epoch') expected = { code: 'stale_epoch' };
    }
  } else if (fenced) fail(env, `${label}: the store took a notice of ${childId} that the model has none of`);
  const code = typeof expected === 'string' ? expected : expected.code;
  count(`notice → ${code}${takeover !== 'none' ? ` (takeover after ${takeover})` : ''}`);
  if (real === 'stale_epoch' || real === undefined) {
    const realCode = real === undefined ? 'none' : 'stale_epoch';
    if (realCode !== code) fail(env, `${label}: delivering the notice of ${childId} answered ${realCode}, the model ${code}`);
  } else {
    if (code === 'none' || code === 'stale_epoch') fail(env, `${label}: the notice of ${childId} was delivered (${real.expiry.action}), the model says ${code}`);
    const m = expected as Outcome;
    const mDispatch = m.code === 'applied' ? m.dispatch : [];
    sameDispatch(env, `${label} (childEnded)`, mDispatch, real.expiry.dispatch);
    if (m.code === 'applied' && real.expiry.client !== model.task(real.parentId).client) fail(env, `${label}: childEnded names client ${real.expiry.client}`);
    if (publish) for (const x of mDispatch) if (x.child === undefined) env.visible.add(attemptKey(x.taskId, x.step, x.kind, x.attempt));
  }
  await check(env, label, await readAll(env));
  if (publish && typeof expected !== 'string' && expected.code === 'applied') await applyChildOps(env, label, expected.dispatch);
}

async function check(env: Env, label: string, after: Map<string, RealTask>): Promise<void> {
  const problems = [...(await compareState(env, after)), ...(await checkInvariants(env, env.last, after))];
  if (problems.length > 0) fail(env, `${label}:\n    - ${problems.join('\n    - ')}`);
  countStates(env.model);
  env.last = after;
}

function realOutcome(o: ResultOutcome) {
  switch (o.type) {
    case 'ok':
      return { ok: true as const, output: encode(okOutput(o)) };
    case 'permanent':
      return { ok: false as const, message: 'permanent failure', retryable: false, effect: o.effect };
    case 'retryable':
      return { ok: false as const, message: 'retryable failure', retryable: true, effect: o.effect };
    case 'circuit_open':
      return { ok: false as const, message: 'the circuit breaker is open', retryable: true, circuitOpenRetryAfterMs: o.retryAfterMs, effect: o.effect };
    case 'throttled':
      return { ok: false as const, message: 'rate limited', retryable: true, throttledRetryAfterMs: o.retryAfterMs, effect: o.effect };
  }
}

async function applyResult(env: Env, label: string, r: AppliedResult, now: number, publish: boolean): Promise<Outcome> {
  const { store } = env.sys;
  const m = await transition(
    env,
    label,
    r.taskId,
    async () => {
      const { step, item } = splitPhase(r.step);
      const res = await store.applyResult({
        lease: env.sys.taskLease(r.taskId),
        taskId: r.taskId,
        step,
        ...(item !== undefined ? { item } : {}),
        kind: r.kind,
        attempt: r.attempt,
        now,
        schedulerId: 'model-scheduler',
        agentId: r.agentId,
        agentType: r.agentType,
        outcome: realOutcome(r.outcome),
      });
      if (res.applied) return { code: 'applied', dispatch: res.transition.dispatch, client: res.transition.client };
      return { code: res.forged ? 'forged' : 'stale', dispatch: [] };
    },
    () => env.model.result(r.taskId, r.step, r.kind, r.attempt, r.outcome, now, r.agentType, r.agentId),
    publish,
  );
  if (m.code === 'applied') env.history.push(r);
  return m;
}

function expireStep(env: Env, label: string, taskId: string, step: string, now: number, epoch: number, publish: boolean): Promise<Outcome> {
  return transition(
    env,
    label,
    taskId,
    async () => {
      const e = await env.sys.store.expireStep(taskId, step, now, epoch);
      return e.action === 'noop' ? { code: 'noop', dispatch: [] } : { code: 'applied', dispatch: e.dispatch, action: e.action, client: e.client };
    },
    () => env.model.expireStep(taskId, step, now, epoch),
    publish,
  );
}

function expireTask(env: Env, label: string, taskId: string, now: number, epoch: number, publish: boolean): Promise<Outcome> {
  return transition(
    env,
    label,
    taskId,
    async () => {
      const e = await env.sys.store.expireTask(taskId, now, epoch);
      return e.action === 'noop' ? { code: 'noop', dispatch: [] } : { code: 'applied', dispatch: e.dispatch, action: e.action, client: e.client };
    },
    () => env.model.expireTask(taskId, now, epoch),
    publish,
  );
}

/** True when the operation has a target in the current state (fast-check's `check`). */
export function applicable(w: World, op: Op): boolean {
  return resolve(w, op) !== undefined;
}

/** The real createTask of task `id` with the plan `choice` makes, submitted by `client`. */
function createTask(env: Env, id: string, op: { choice: PlanChoice }, client: string, now: number) {
  const real = realPlan(op.choice);
  return env.sys.store.createTask({
    lease: env.sys.taskLease(id),
    taskId: id,
    workflow: 'w',
    version: 1,
    input: encode(taskInput(op.choice, now)),
    plan: real.plan,
    onFailure: real.onFailure,
    ...(real.deadlineMs !== undefined ? { deadlineMs: real.deadlineMs } : {}),
    client,
    // Every task is tagged, so every transition's search index upkeep is checked (invariants.ts, decision 0021).
    tags: { model: 'yes', task: id },
    now,
    schedulerId: 'model-scheduler',
    ...(env.model.share > 0 ? { maxActive: env.model.share * BUCKETS } : {}),
  });
}

/** A new task's id: `t<n>`, or with admission on (decision 0024) the first `t<n>`, `t<n>-<k>` in bucket 0. */
function newTaskId(env: Env): string {
  const n = env.model.tasks.size + 1;
  if (env.model.share === 0) return `t${n}`;
  for (let k = 0; ; k++) {
    const id = k === 0 ? `t${n}` : `t${n}-${k}`;
    if (bucketOf(id) === 0) return id;
  }
}

/** Runs one operation on both sides and checks them; an operation without a target does nothing. */
export async function execute(env: Env, op: Op): Promise<void> {
  const target = resolve(env, op);
  if (!target) return;
  const label = `#${env.log.length + 1} ${JSON.stringify(op)} @${env.model.clock - T0}`;
  env.log.push(label);
  env.current = op.t;
  const { store } = env.sys;
  const model = env.model;
  switch (target.t) {
    case 'submit': {
      if (op.t !== 'submit') break;
      const id = newTaskId(env);
      const real = realPlan(op.choice);
      const spec = modelSpec(op.choice);
      // Core's default give-up time is the decision's formula (checked here once per plan, not assumed).
      for (const [i, p] of real.plan.entries()) {
        const s = spec.steps[i]!;
        if (s.sleep || s.waitFor || s.child) continue; // no agent, no ladder
        if (p.g !== s.run.giveUpAfterMs || p.c?.g !== s.comp?.giveUpAfterMs) {
          fail(env, `the compiled plan's give-up time of ${p.n} (${p.g}, compensation ${p.c?.g}) is not decision 0009's (${s.run.giveUpAfterMs}, ${s.comp?.giveUpAfterMs})`);
        }
      }
      const now = model.clock;
      const client = clientId(op.client);
      env.choices.set(id, op.choice);
      await transition(
        env,
        label,
        id,
        async () => {
          const res = await createTask(env, id, op, client, now);
          if (!res.created) throw new Error(`createTask ${id}: the task already existed (${res.status}, client ${res.client})`);
          return { code: 'applied', dispatch: res.transition.dispatch, client: res.transition.client };
        },
        () => model.create(id, client, spec, now, taskInput(op.choice, now)),
        op.publish,
      );
      return;
    }
    case 'resubmit': {
      if (op.t !== 'resubmit') break;
      // The same task id again (a redelivered submission, or another client reusing the id): the store
      // answers with the task's status and its submitter, and changes nothing (decision 0010: the
      // scheduler refuses one from another client).
      const task = target.task;
      const before = await snapshot(env.sys);
      const res = await createTask(env, task.id, { choice: { shape: 0, run: [0, 100, 1, 0], comp: [0, 100, 1, 0] } }, clientId(op.client), model.clock);
      count(`resubmit (${clientId(op.client) === task.client ? 'same' : 'another'} client)`);
      if (res.created) fail(env, `${label}: createTask of the existing task ${task.id} created it again`);
      else if (res.status !== task.status || res.client !== task.client) {
        fail(env, `${label}: a duplicate createTask answered status ${res.status}, client ${res.client}; the task is ${task.status}, submitted by ${task.client}`);
      }
      if (!isDeepStrictEqual(before, await snapshot(env.sys))) fail(env, `${label}: a duplicate createTask changed the store`);
      await check(env, label, await readAll(env));
      return;
    }
    case 'advance':
      if (op.t === 'advance') model.clock += op.ms;
      await check(env, label, await readAll(env));
      return;
    case 'result': {
      if (op.t !== 'result') break;
      const { task, step, kind, attempt } = target.target;
      env.current = `result (${kind}${task.status === 'compensating' && kind === 'run' ? ' drain' : ''} ${op.outcome.type})`;
      const r: AppliedResult = { taskId: task.id, step: step.spec.name, kind, attempt, outcome: op.outcome, agentType: expectedAgent(step, kind), agentId: `agent-${op.agent ?? 0}` };
      await applyResult(env, label, r, model.clock - op.lag, op.publish);
      return;
    }
    case 'stale': {
      if (op.t !== 'stale') break;
      const { task, step, kind } = target.target;
      const r: AppliedResult = { taskId: task.id, step: step.spec.name, kind, attempt: target.attempt, outcome: op.outcome, agentType: expectedAgent(step, kind), agentId: 'agent-late' };
      const m = await applyResult(env, label, r, model.clock, true);
      if (m.code !== 'stale') fail(env, `${label}: a result for an older attempt was not stale (${m.code})`);
      return;
    }
    case 'duplicate':
      await applyResult(env, label, target.result, model.clock, true);
      return;
    case 'unstarted': {
      if (op.t !== 'unstarted') break;
      const { task, step, kind } = target.target;
      const r: AppliedResult = { taskId: task.id, step: step.spec.name, kind, attempt: target.attempt, outcome: op.outcome, agentType: expectedAgent(step, kind), agentId: 'agent-early' };
      const m = await applyResult(env, label, r, model.clock, true);
      if (m.code !== 'stale') fail(env, `${label}: a result for an attempt that never started was not stale (${m.code})`);
      return;
    }
    case 'forged': {
      if (op.t !== 'forged') break;
      const { task, step, kind, attempt } = target.target;
      env.current = `forged (${op.by})`;
      const r: AppliedResult = { taskId: task.id, step: step.spec.name, kind, attempt, outcome: op.outcome, agentType: target.agentType, agentId: 'agent-forger' };
      const m = await applyResult(env, label, r, model.clock, true);
      if (m.code !== 'forged') fail(env, `${label}: a result for the current attempt from agent type ${target.agentType} (the ${kind} of ${step.spec.name} is ${expectedAgent(step, kind)}'s) was not rejected as forged (${m.code})`);
      return;
    }
    case 'expire':
      if (op.t !== 'expire') break;
      if (op.when === 'due') model.clock = Math.max(model.clock, target.now);
      await expireStep(env, label, target.taskId, target.step, target.now, model.epoch, op.publish);
      return;
    case 'expireTask':
      if (op.t !== 'expireTask') break;
      if (op.when === 'due') model.clock = Math.max(model.clock, target.now);
      await expireTask(env, label, target.taskId, target.now, model.epoch, op.publish);
      return;
    case 'sweep':
      if (op.t === 'sweep') await sweep(env, label, op.publish);
      return;
    case 'takeover':
      // A new leader fences every bucket before it acts (decision 0015).
      await store.fenceBuckets(model.epoch + 1);
      model.epoch++;
      await check(env, label, await readAll(env));
      return;
    case 'deposed': {
      const old = model.epoch - 1;
      if (target.step === '#parent') {
        await deliver(env, label, target.taskId, old, true);
        return;
      }
      if (target.step === '#admit') {
        const m = await admit(env, label, target.taskId, target.now, 'supervisor', old, true);
        if (m.code !== 'stale_epoch') fail(env, `${label}: an admission at the deposed epoch ${old} was not rejected (${m.code})`);
        return;
      }
      const m =
        target.step === '#task'
          ? await expireTask(env, label, target.taskId, target.now, old, true)
          : await expireStep(env, label, target.taskId, target.step, target.now, old, true);
      if (m.code !== 'stale_epoch') fail(env, `${label}: a write at the deposed epoch ${old} was not rejected (${m.code})`);
      return;
    }
    case 'task': {
      const id = target.task.id;
      if (op.t === 'retry') {
        env.current = `retry (task ${target.task.status})`;
        const names = target.task.spec.steps.map((s) => s.name);
        const step = op.step === null ? undefined : names[op.step % names.length];
        const now = model.clock - op.lag;
        await transition(
          env,
          label,
          id,
          async () => {
            const t = await store.retryStep({ lease: env.sys.taskLease(id), taskId: id, ...(step !== undefined ? { step } : {}), now, schedulerId: 'model-scheduler' });
            return { code: 'applied', dispatch: t.dispatch, client: t.client };
          },
          () => model.retry(id, step, now),
          op.publish,
        );
      } else if (op.t === 'cancel') {
        const now = model.clock - op.lag;
        await transition(
          env,
          label,
          id,
          async () => {
            const t = await store.cancelTask({ lease: env.sys.taskLease(id), taskId: id, reason: 'operator cancel', now, schedulerId: 'model-scheduler' });
            return { code: 'applied', dispatch: t.dispatch, client: t.client };
          },
          () => model.cancel(id, now),
          op.publish,
        );
      } else if (op.t === 'signal') {
        const name = SIGNAL_NAMES[op.name];
        const signalId = `sig-${op.id}`;
        const data = { sig: op.data };
        env.current = `signal (${op.name}, task ${target.task.status})`;
        await transition(
          env,
          label,
          id,
          async () => {
            try {
              const r = await store.signalTask({ lease: env.sys.taskLease(id), taskId: id, name, signalId, data: encode(data), now: model.clock, schedulerId: 'model-scheduler' });
              if (r.outcome === 'duplicate') return { code: 'noop', dispatch: [] };
              return { code: 'applied', dispatch: r.transition.dispatch, action: r.outcome, client: r.transition.client };
            } catch (e) {
              // A full buffer writes nothing, as a refusal does.
              if (e instanceof TriadError && e.code === ErrorCode.Unavailable && /already holds 16 signals/.test(e.message)) return { code: 'invalid', dispatch: [] };
              throw e;
            }
          },
          () => model.signal(id, name, signalId, data, model.clock),
          true,
        );
      } else if (op.t === 'resend') {
        const t = await store.inFlight(id);
        const expected = model.expectedInFlight(id);
        sameDispatch(env, `${label} (inFlight)`, expected, t?.dispatch ?? []);
        if (t && t.client !== target.task.client) fail(env, `${label}: inFlight names client ${t.client}, the task was submitted by ${target.task.client}`);
        for (const d of expected) if (d.child === undefined) env.visible.add(attemptKey(d.taskId, d.step, d.kind, d.attempt));
        await check(env, label, await readAll(env));
        await applyChildOps(env, label, expected);
      }
      return;
    }
    case 'grant': {
      if (op.t !== 'grant') break;
      const { task, step, kind, n } = target;
      const name = step.spec.name;
      const now = model.clock - op.lag;
      // A grant's complete-by is its grant time + the phase's budget; a late start comes within 100 ms of it.
      const completeBy = op.late ? now + 10 : now + model.phaseSpec(step, kind).budgetMs;
      env.current = `grant (${kind}${op.late ? ', late' : ''}${op.old ? ', old ticket' : ''})`;
      await transition(
        env,
        label,
        task.id,
        async () => {
          const r = await store.startQueued({ lease: env.sys.taskLease(task.id), taskId: task.id, phase: name, kind, ticket: `${task.id}|${name}|${kind}|${n}`, completeBy, now, schedulerId: 'model-scheduler' });
          if (r.started) return { code: 'applied', dispatch: r.transition.dispatch, client: r.transition.client };
          return { code: r.why === 'late' ? 'late' : 'stale', dispatch: [] };
        },
        () => model.startQueued(task.id, name, kind, n, completeBy, now),
        op.publish,
      );
      return;
    }
    case 'notice':
      if (op.t === 'notice') await deliver(env, label, target.taskId, model.epoch, true, op.takeover);
      return;
    case 'admit':
      if (op.t === 'admit') await admit(env, label, target.task.id, model.clock, op.by, model.epoch, op.publish);
      return;
    case 'publishAlerts': {
      const pending = await store.pendingAlerts(10_000);
      const real = pending.map((p) => `${p.alert.id}@${p.alert.raisedAt}`).sort();
      const expected = model.outbox.map((a) => `${a.id}@${a.raisedAt}`).sort();
      if (!isDeepStrictEqual(real, expected)) fail(env, `${label}: the outbox holds ${JSON.stringify(real)} but the model's holds ${JSON.stringify(expected)}`);
      await store.alertsPublished(pending);
      model.published();
      await check(env, label, await readAll(env));
      return;
    }
  }
  fail(env, `${label}: the operation and its target disagree (${target.t})`);
}

/**
 * admitTask (decision 0024) on both sides: by the scheduler (under the lease) or by the supervisor at
 * `epoch`. Not started (INVALID_STATE: only the member goes) counts as applied with nothing sent.
 */
async function admit(env: Env, label: string, taskId: string, now: number, by: 'scheduler' | 'supervisor', epoch: number, publish: boolean): Promise<Outcome> {
  const { store } = env.sys;
  const model = env.model;
  env.current = `admit (${by})`;
  const client = model.task(taskId).client;
  return transition(
    env,
    label,
    taskId,
    async () => {
      if (by === 'scheduler') {
        const r = await store.admitTask({ lease: env.sys.taskLease(taskId), taskId, now, schedulerId: 'model-scheduler' });
        return r.started ? { code: 'applied', dispatch: r.transition.dispatch, client: r.transition.client } : { code: 'applied', dispatch: [], client };
      }
      const x = await store.admitAsLeader(taskId, now, epoch);
      return x.action === 'admit' ? { code: 'applied', dispatch: x.dispatch, action: x.action, client: x.client } : { code: 'applied', dispatch: [], client };
    },
    () => model.admit(taskId, now, by === 'supervisor', epoch),
    publish,
  );
}

/** A supervisor sweep: what expiredSteps lists (compared with the model's index), then each expiry in turn. */
export async function sweep(env: Env, label: string, publish: boolean): Promise<void> {
  const now = env.model.clock;
  const listed = await env.sys.store.expiredSteps(now, 10_000);
  const real = listed.map((e) => `${e.taskId}|${e.step}@${e.completeBy}`).sort();
  const expected = [...env.model.expectedDeadlines()]
    .filter(([, score]) => score <= now)
    .map(([m, score]) => `${m}@${score}`)
    .sort();
  if (!isDeepStrictEqual(real, expected)) fail(env, `${label}: expiredSteps listed ${JSON.stringify(real)} but the model expects ${JSON.stringify(expected)}`);
  for (const e of listed) {
    const sub = `${label} → expire ${e.taskId}|${e.step}`;
    env.current = e.step === '#task' ? 'sweep: expireTask' : e.step === '#parent' ? 'sweep: notice' : 'sweep: expireStep';
    if (e.step === '#parent') await deliver(env, sub, e.taskId, env.model.epoch, publish);
    else if (e.step === '#admit') await admit(env, sub, e.taskId, now, 'supervisor', env.model.epoch, publish);
    else if (e.step === '#task') await expireTask(env, sub, e.taskId, now, env.model.epoch, publish);
    else await expireStep(env, sub, e.taskId, e.step, now, env.model.epoch, publish);
  }
}

/** The deadline index, for the calm phase's clock. */
export async function nextDeadline(env: Env): Promise<number | undefined> {
  const d = await readDeadlines(env.sys);
  return d.size === 0 ? undefined : Math.min(...d.values());
}
