// Compares the real store's state with the model's after a transition: every task and step field the
// decisions define, the deadline index (members and scores), the finished and compaction indexes, the
// open alerts and the outbox. Returns one line per difference.
import { isDeepStrictEqual } from 'node:util';
import { TERMINAL, type Phase, type StepM, type TaskM } from './model.js';
import type { World } from './ops.js';
import { admissionKeys } from '../../src/index.js';
import { readAlerts, readCompact, readDeadlines, readFinished, type RealSystem, type RealTask } from './real.js';
import type { CompensationRecord, StepRecord } from '../../src/task-view.js';

function diff(out: string[], where: string, real: unknown, model: unknown): void {
  if (!isDeepStrictEqual(real, model)) out.push(`${where}: real ${JSON.stringify(real)}, model ${JSON.stringify(model)}`);
}

function phaseFields(ph: Phase, active: boolean) {
  return {
    attempt: ph.attempt,
    failureCount: ph.failureCount,
    circuitCount: ph.circuitCount,
    giveUpAt: ph.giveUpAt,
    lockedBy: ph.lockedBy,
    // completeBy only means something while the phase runs or is parked, reported while it runs.
    completeBy: active ? ph.completeBy : undefined,
    reported: active && !ph.parked ? ph.reported : undefined,
  };
}

function realPhaseFields(rec: StepRecord | CompensationRecord, active: boolean, parked: boolean) {
  return {
    attempt: rec.attempt,
    failureCount: rec.failureCount,
    circuitCount: rec.circuitCount ?? 0,
    giveUpAt: rec.giveUpAt,
    lockedBy: rec.lockedBy === '' ? undefined : rec.lockedBy,
    completeBy: active ? rec.completeBy : undefined,
    reported: active && !parked ? rec.reported === true : undefined,
  };
}

/** A phase's queue as the store keeps it (ticket, check, next check), and as the model says it should be (decision 0020). */
function queueFields(r: unknown): unknown[] | undefined {
  const q = (r as { q?: { t: string; check: number; at: number } } | undefined)?.q;
  return q ? [q.t, q.check, q.at] : undefined;
}
function modelQueue(taskId: string, name: string, kind: string, q: { n: number; check: number; at: number } | undefined): unknown[] | undefined {
  return q ? [`${taskId}|${name}|${kind}|${q.n}`, q.check, q.at] : undefined;
}

function compareStep(out: string[], t: TaskM, s: StepM, real: RealTask): void {
  const name = s.spec.name;
  const where = `task ${t.id} step ${name}`;
  const rec = real.recs.get(name);
  const view = real.view.steps.find((x) => x.name === name);
  if (!rec || !view) {
    out.push(`${where}: missing in the real task`);
    return;
  }
  diff(out, `${where} status`, view.status, s.status);
  diff(out, `${where} effect`, view.effect, s.effect);
  // The client's view and the raw record must say the same.
  diff(out, `${where} view attempt/failureCount/circuitCount/lockedBy`, [view.attempt, view.failureCount, view.circuitCount ?? 0, view.lockedBy], [rec.attempt, rec.failureCount, rec.circuitCount ?? 0, rec.lockedBy || undefined]);
  const runActive = s.status === 'processing' || s.status === 'parked';
  diff(out, `${where} run`, realPhaseFields(rec, runActive, rec.status === 'parked'), phaseFields(s.run, runActive));
  if (s.run.attempt > 0) diff(out, `${where} startedAt`, rec.startedAt, s.run.startedAt);
  // Decision 0020: a phase waiting for a limit holds its ticket and its next check; the waits add up.
  const queueOf = (r: unknown) => {
    const q = (r as { q?: { t: string; check: number; at: number } } | undefined)?.q;
    return q ? [q.t, q.check, q.at] : undefined;
  };
  const ticket = (kind: string, q: { n: number; check: number; at: number } | undefined) => (q ? [`${t.id}|${name}|${kind}|${q.n}`, q.check, q.at] : undefined);
  diff(out, `${where} run queue (ticket, check, at), waitedMs`, [queueOf(rec), (rec as { waitedMs?: number }).waitedMs], [ticket('run', s.run.q), s.run.waitedMs]);
  if (s.comp && rec.comp) diff(out, `${where} compensation queue (ticket, check, at), waitedMs`, [queueOf(rec.comp), (rec.comp as { waitedMs?: number }).waitedMs], [ticket('compensate', s.comp.q), s.comp.waitedMs]);
  if (s.status === 'processed') diff(out, `${where} processed at, order`, [rec.finishedAt, rec.order], [s.processedAt, s.order]);
  if (s.spec.sleep && s.sleptAt !== undefined) diff(out, `${where} sleep started at`, rec.startedAt, s.sleptAt);
  if (s.spec.waitFor && s.waitedAt !== undefined) diff(out, `${where} wait started at, waits`, [rec.startedAt, rec.waits], [s.waitedAt, s.waits]);
  if (s.status === 'waiting' && s.spec.waitFor) diff(out, `${where} timeout at (record and view)`, [rec.timeoutAt, view.until, view.kind, view.signal], [s.timeoutAt, s.timeoutAt, 'signal', s.spec.waitFor?.signal]);
  if (s.spec.waitFor && s.status === 'processed') diff(out, `${where} signal taken, output`, [rec.signalId, view.output], [s.signalId, s.output]);
  if (s.status === 'sleeping') diff(out, `${where} wake at (record and view)`, [rec.wakeAt, view.until, view.kind], [s.wakeAt, s.wakeAt, 'sleep']);
  if (s.status === 'skipped') diff(out, `${where} skipped at, reason (record and view)`, [rec.finishedAt, rec.reason, view.reason], [s.skippedAt, s.reason, s.reason]);
  if (s.spec.child) {
    // A child step (decision 0019 §5): its child, the operation last asked, its check, how it ended; its output the child's.
    const c = rec.child;
    diff(out, `${where} child`, c ? [c.id, c.op, c.sent, c.next, c.timeoutAt, c.timedOut === true, c.ended] : undefined, s.child ? [s.child.id, s.child.op, s.child.sent, s.child.next, s.child.timeoutAt, s.child.timedOut === true, s.child.ended] : undefined);
    if (s.child) {
      const until = s.status === 'waiting' && s.child.op === 'start' && !s.child.timedOut ? s.child.timeoutAt : undefined;
      diff(out, `${where} view child, until`, [view.kind, view.child?.taskId, view.child?.op, view.child?.ended, view.until], ['child', s.child.id, s.child.op, s.child.ended, until]);
    }
    if (s.status === 'processed') diff(out, `${where} output (the child's)`, view.output, s.output);
  }
  if (!s.comp) {
    if (rec.comp) out.push(`${where}: the real step has a compensation phase ${JSON.stringify(rec.comp)}, the model none`);
    return;
  }
  if (!rec.comp || !view.compensation) {
    out.push(`${where}: the model's step has a compensation phase, the real one none`);
    return;
  }
  const compActive = s.status === 'compensating';
  diff(out, `${where} compensation`, { ...realPhaseFields(rec.comp, compActive, rec.comp.parked === true), parked: rec.comp.parked === true }, { ...phaseFields(s.comp, compActive), parked: s.comp.parked });
  diff(out, `${where} view compensation attempt/failureCount`, [view.compensation.attempt, view.compensation.failureCount], [rec.comp.attempt, rec.comp.failureCount]);
  if (s.comp.attempt > 0) diff(out, `${where} compensation startedAt`, rec.comp.startedAt, s.comp.startedAt);
}

/** A fan-out step's progress and elements (decision 0019 §2.2): each element's record as a step's is compared. */
function compareFanOut(out: string[], t: TaskM, s: StepM, real: RealTask): void {
  const where = `task ${t.id} step ${s.spec.name}`;
  const fe = real.fanOut.get(s.spec.name);
  diff(out, `${where} fan-out (n, elements in flight)`, fe ? [fe.n, [...fe.live].sort()] : undefined, s.fe ? [s.fe.n, [...s.fe.live].sort()] : undefined);
  if (s.status === 'processed') diff(out, `${where} output (the elements' outputs in index order)`, real.view.steps.find((x) => x.name === s.spec.name)?.output, s.output);
  for (const e of s.elements ?? []) {
    const name = e.spec.name;
    const ew = `task ${t.id} element ${name}`;
    const rec = real.elements.get(name);
    if (!rec) {
      // Never started: no record yet.
      if (e.status !== 'pending' || e.run.attempt !== 0) out.push(`${ew}: the model's element is ${e.status} (attempt ${e.run.attempt}), the store has no record of it`);
      continue;
    }
    diff(out, `${ew} status, effect`, [rec.status, rec.effect ?? 'none'], [e.status, e.effect]);
    const runActive = e.status === 'processing' || e.status === 'parked';
    diff(out, `${ew} run`, realPhaseFields(rec, runActive, rec.status === 'parked'), phaseFields(e.run, runActive));
    if (e.run.attempt > 0) diff(out, `${ew} startedAt`, rec.startedAt, e.run.startedAt);
    diff(out, `${ew} run queue (ticket, check, at), waitedMs`, [queueFields(rec), (rec as { waitedMs?: number }).waitedMs], [modelQueue(t.id, e.spec.name, 'run', e.run.q), e.run.waitedMs]);
    if (e.comp && rec.comp) diff(out, `${ew} compensation queue`, [queueFields(rec.comp), (rec.comp as { waitedMs?: number }).waitedMs], [modelQueue(t.id, e.spec.name, 'compensate', e.comp.q), e.comp.waitedMs]);
    if (e.status === 'processed') diff(out, `${ew} processed at, order`, [rec.finishedAt, rec.order], [e.processedAt, e.order]);
    if (!e.comp) {
      if (rec.comp) out.push(`${ew}: the real element has a compensation phase ${JSON.stringify(rec.comp)}, the model none`);
      continue;
    }
    if (!rec.comp) {
      out.push(`${ew}: the model's element has a compensation phase, the real one none`);
      continue;
    }
    const compActive = e.status === 'compensating';
    diff(out, `${ew} compensation`, { ...realPhaseFields(rec.comp, compActive, rec.comp.parked === true), parked: rec.comp.parked === true }, { ...phaseFields(e.comp, compActive), parked: e.comp.parked });
    if (e.comp.attempt > 0) diff(out, `${ew} compensation startedAt`, rec.comp.startedAt, e.comp.startedAt);
  }
}

function sortedEntries(m: Map<string, number>): [string, number][] {
  return [...m].sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
}

export async function compareState(w: World & { sys: RealSystem }, after: Map<string, RealTask>): Promise<string[]> {
  const out: string[] = [];
  const model = w.model;
  for (const t of model.tasks.values()) {
    const real = after.get(t.id);
    if (!real) {
      out.push(`task ${t.id}: missing in the store`);
      continue;
    }
    diff(out, `task ${t.id} status`, real.view.status, t.status);
    diff(out, `task ${t.id} signals kept`, (real.view.signals ?? []).map((x) => `${x.signalId}:${x.name}`), t.signalQueue.map((q) => `${q.id}:${q.name}`));
    diff(out, `task ${t.id} staleResults`, real.staleResults, t.staleResults);
    diff(out, `task ${t.id} forgedResults`, real.forgedResults, t.forgedResults);
    diff(out, `task ${t.id} client`, real.view.client, t.client);
    diff(out, `task ${t.id} deadlineAt`, real.view.deadlineAt, t.deadlineAt);
    diff(out, `task ${t.id} finishedAt`, real.view.finishedAt, TERMINAL.has(t.status) ? t.finishedAt : undefined);
    if (t.endAs !== undefined) diff(out, `task ${t.id} endAs`, real.endAs, t.endAs);
    diff(out, `task ${t.id} link (parent, step, kind, attempt, holdUntil)`, real.link, t.link ? { ...t.link } : undefined);
    diff(out, `task ${t.id} parent (view)`, real.view.parent, t.link ? { taskId: t.link.parent, step: t.link.step } : undefined);
    diff(out, `task ${t.id} notified`, real.notified, t.notified);
    diff(out, `task ${t.id} admission (view)`, real.view.admission, t.status === 'running' && t.adm ? (t.adm === 'w' ? 'waiting' : 'admitted') : undefined);
    if (t.status === 'completed' && t.link) diff(out, `task ${t.id} output`, real.view.output, t.output);
    for (const s of t.steps.values()) {
      compareStep(out, t, s, real);
      if (s.spec.forEach) compareFanOut(out, t, s, real);
    }
  }

  diff(out, 'deadline index', sortedEntries(await readDeadlines(w.sys)), sortedEntries(model.expectedDeadlines()));
  // Admission (decision 0024): each client's active set and waiting queue per bucket.
  for (const [key, a] of model.admission) {
    const [bucket, client] = [Number(key.slice(0, key.indexOf('|'))), key.slice(key.indexOf('|') + 1)];
    const k = admissionKeys(w.sys.store.keys.buckets[bucket]!, client);
    diff(out, `admission of ${client} in bucket ${bucket} (active)`, (await w.sys.redis.smembers(k.active)).sort(), [...a.active].sort());
    diff(out, `admission of ${client} in bucket ${bucket} (waiting, in order)`, await w.sys.redis.zrange(k.waiting, 0, -1), a.waiting);
  }

  const finished = new Map<string, number>();
  const compact = new Map<string, number>();
  for (const t of model.tasks.values()) {
    if (!TERMINAL.has(t.status)) continue;
    // A child is kept from retention until its parent may no longer undo it (decision 0019 §2.8).
    const at = t.link && t.link.holdUntil > t.finishedAt! ? t.link.holdUntil : t.finishedAt!;
    finished.set(t.id, at);
    if (t.status === 'completed' || t.status === 'compensated' || t.status === 'cancelled') compact.set(t.id, at);
  }
  diff(out, 'finished index', sortedEntries(await readFinished(w.sys)), sortedEntries(finished));
  diff(out, 'compaction index', sortedEntries(await readCompact(w.sys)), sortedEntries(compact));

  const alerts = await readAlerts(w.sys);
  const show = (a: { id: string; kind: string; step?: string; item?: number; failureCount: number; raisedAt: number }) => `${a.id} ${a.kind} ${a.step ?? '-'}${a.item !== undefined ? `#${a.item}` : ''} ${a.failureCount} @${a.raisedAt}`;
  diff(out, 'open alerts', [...alerts.open.values()].map(show).sort(), [...model.openAlerts.values()].map(show).sort());
  // Every give-up raises its own alert (its id names the attempt that gave up, decision 0009 §4), so the
  // outbox — a set of alert JSON in the store — and the model's list hold the same entries, each once.
  diff(
    out,
    'alert outbox',
    alerts.outbox.map((e) => `${show(e.alert)} score ${e.score}`).sort(),
    model.outbox.map((a) => `${show(a)} score ${a.raisedAt}`).sort(),
  );
  return out;
}
