// The invariants of decision 0009, checked on the real store alone (not through the model) after every
// transition: order of starts, when and in which order compensations run, alerts recorded by the
// transition that needs them (each give-up its own alert id), and a deadline for every task that is not
// finished.
import type { StepRecord } from '../../src/task-view.js';
import { readAlerts, readDeadlines, type RealSystem, type RealTask } from './real.js';

const rec = (t: RealTask, name: string): string | undefined => t.recs.get(name)?.status;
const UNDO_CANDIDATE = new Set(['processed', 'abandoned', 'failed', 'error']);
const TERMINAL = new Set(['completed', 'failed', 'compensated', 'cancelled', 'compensation_failed']);

/**
 * The undo's order key of a step record (decision 0009 §3), compared descending. A run that completed
 * keeps its completion `order` (also once its compensation started); an in-doubt one never had one.
 */
function undoKey(rec: StepRecord): [number, number, number] {
  if (rec.order !== undefined) return [rec.finishedAt ?? 0, 0, rec.order];
  // A fan-out step that did not complete: by its last element's start (decision 0019 U5).
  const lastStart = (rec as { fe?: { lastStart?: number } }).fe?.lastStart;
  return [lastStart ?? rec.startedAt ?? 0, 1, 0];
}

function before(a: [number, number, number], b: [number, number, number]): boolean {
  for (let i = 0; i < 3; i++) if (a[i] !== b[i]) return a[i]! > b[i]!;
  return false;
}

/**
 * The alerts a failed task must have open (decision 0009 §4), from its real state: one per step that
 * failed it (error, failed, or a failed compensation), or the task deadline's when no step did; each
 * named by the attempt of the phase that gave up.
 */
function expectedAlerts(t: RealTask): string[] {
  const id = t.view.taskId;
  const out: string[] = [];
  for (const [name, rec] of t.recs) {
    if (t.fanOut.has(name)) continue; // a fan-out step's alerts are its elements' (below), unless it failed at its start
    if (t.view.status === 'compensation_failed' && rec.status === 'compensation_failed') out.push(`${id}:${name}:compensation_failed:${rec.comp?.attempt ?? 0}`);
    if (t.view.status === 'failed' && rec.status === 'error') out.push(`${id}:${name}:step_error:${rec.attempt}`);
    if (t.view.status === 'failed' && rec.status === 'failed') out.push(`${id}:${name}:step_failed:${rec.attempt === 0 && rec.startFailures ? `start-${rec.startFailures}` : rec.attempt}`);
  }
  // Fan-out (decision 0019 R13, U6): the element that gave up, each element whose compensation failed.
  for (const [name, rec] of t.elements) {
    if (t.view.status === 'compensation_failed' && rec.status === 'compensation_failed') out.push(`${id}:${name}:compensation_failed:${rec.comp?.attempt ?? 0}`);
    if (t.view.status === 'failed' && rec.status === 'error') out.push(`${id}:${name}:step_error:${rec.attempt}`);
    if (t.view.status === 'failed' && rec.status === 'failed') out.push(`${id}:${name}:step_failed:${rec.attempt}`);
  }
  if (out.length === 0 && t.view.status === 'failed') out.push(`${id}:#task:task_deadline:0`);
  return out;
}

/**
 * `raised`: every alert seen in the outbox so far, id → JSON (kept across transitions, as the outbox is
 * emptied by publishing): an alert id is unique per give-up, so a new alert never reuses an old id.
 */
export async function checkInvariants(w: { sys: RealSystem; raised: Map<string, string> }, prev: Map<string, RealTask>, after: Map<string, RealTask>): Promise<string[]> {
  const out: string[] = [];
  const deadlines = await readDeadlines(w.sys);
  const alerts = await readAlerts(w.sys);
  for (const { alert } of alerts.outbox) {
    const json = JSON.stringify(alert);
    const earlier = w.raised.get(alert.id);
    if (earlier !== undefined && earlier !== json) out.push(`alert: ${alert.id} was raised again (${json}); the earlier alert with that id was ${earlier}`);
    w.raised.set(alert.id, json);
  }
  for (const [id, t] of after) {
    // The search index (decision 0021 §1.5): exactly the members the record implies — each tag, the status
    // it is in now, its workflow and client — whatever transitions it went through.
    const own = (await w.sys.redis.zrange(w.sys.store.keys.forTask(id).search, 0, -1)).filter((m) => m.endsWith(`\x1f${id}`)).sort();
    const at = String(t.view.createdAt).padStart(13, '0');
    // A child task (decision 0019 §5) carries no tags: it is not indexed (an untagged task costs nothing).
    const expected = t.link ? [] : [['t', 'model=yes'], ['t', `task=${id}`], ['s', String(t.view.status)], ['w', t.view.workflow], ['c', t.view.client ?? 'default']].map(([k, v]) => `${k}\x1f${v}\x1f${at}\x1f${id}`).sort();
    if (JSON.stringify(own) !== JSON.stringify(expected)) out.push(`search: ${id} (${t.view.status}) has index members ${JSON.stringify(own)}; its record implies ${JSON.stringify(expected)}`);
    const old = prev.get(id);
    const status = t.view.status;
    let compensating = 0;
    let processing = 0;
    for (const p of t.plan) {
      const rec = t.recs.get(p.n)!;
      const was = old?.recs.get(p.n);
      if (rec.status === 'processing') processing++;
      if (rec.status === 'compensating') compensating++;

      // Order: a step starts (or is skipped) only after its dependencies are done: processed or skipped (decision 0019).
      if (rec.attempt > 0 || rec.status === 'skipped') {
        for (const d of p.d) {
          const dep = t.recs.get(d)!;
          if (dep.order === undefined && dep.status !== 'skipped') out.push(`order: ${id}/${p.n} became ready (attempt ${rec.attempt}, ${rec.status}) but its dependency ${d} was never processed nor skipped (${dep.status})`);
          const newly = rec.attempt > (was?.attempt ?? 0) || (rec.status === 'skipped' && was?.status !== 'skipped');
          if (newly && dep.status !== 'processed' && dep.status !== 'skipped') out.push(`order: ${id}/${p.n} became ready in this transition while its dependency ${d} is ${dep.status}`);
        }
      }
      // A skipped step never ran: no attempt, no effect, no compensation, and a reason (decision 0019 §9.1).
      if (rec.status === 'skipped' && (rec.attempt !== 0 || (rec.effect ?? 'none') !== 'none' || rec.comp || !rec.reason)) {
        out.push(`skipped: ${id}/${p.n} is skipped but has attempt ${rec.attempt}, effect ${rec.effect ?? 'none'}, compensation ${JSON.stringify(rec.comp)}, reason ${JSON.stringify(rec.reason)}`);
      }

      // Compensations: only for a step that declares one and whose effect is not 'none'.
      if (rec.comp || rec.status === 'compensating' || rec.status === 'compensated' || rec.status === 'compensation_failed') {
        // A child step is undone by undoing its child (decision 0019 U7): it declares no compensation of its own.
        if (!p.c && p.k !== 'c') out.push(`compensation: ${id}/${p.n} is ${rec.status} but declares no compensation`);
        if ((rec.effect ?? 'none') === 'none') out.push(`compensation: ${id}/${p.n} is ${rec.status} (compensation ${JSON.stringify(rec.comp)}) but its effect is none`);
      }
      if (rec.status === 'compensating' && status !== 'compensating') out.push(`compensation: ${id}/${p.n} compensates while its task is ${status}`);

      // A compensation that started in this transition is the first in the undo's order.
      if ((rec.comp?.attempt ?? 0) > (was?.comp?.attempt ?? 0)) {
        for (const q of t.plan) {
          const other = t.recs.get(q.n)!;
          if (q.n === p.n || !q.c || (other.effect ?? 'none') === 'none' || !UNDO_CANDIDATE.has(other.status)) continue;
          if (before(undoKey(other), undoKey(rec))) {
            out.push(`compensation order: ${id}/${p.n} (key ${JSON.stringify(undoKey(rec))}) started before ${q.n} (${other.status}, key ${JSON.stringify(undoKey(other))})`);
          }
        }
      }
    }
    if (compensating > 1) out.push(`compensation: ${id} runs ${compensating} compensations at once`);
    // Fan-out (decision 0019 §9.1): no more than maxParallel elements started and not ended, nor
    // compensating, at once; a fan-out step's element compensations are its only ones running.
    for (const p of t.plan) {
      if (!p.fe) continue;
      const mine = [...t.elements].filter(([n]) => n.startsWith(`${p.n}#`)).map(([, r]) => r);
      const running = mine.filter((r) => r.status === 'processing' || r.status === 'parked').length;
      const undoing = mine.filter((r) => r.status === 'compensating').length;
      if (running > p.fe.x) out.push(`fan-out: ${id}/${p.n} has ${running} elements running, above maxParallel ${p.fe.x}`);
      if (undoing > p.fe.x) out.push(`fan-out: ${id}/${p.n} compensates ${undoing} elements at once, above maxParallel ${p.fe.x}`);
      if (undoing > 0 && t.recs.get(p.n)?.status !== 'compensating') out.push(`fan-out: ${id}/${p.n} is ${t.recs.get(p.n)?.status} while ${undoing} of its elements compensate`);
      if (running > 0 && (rec(t, p.n) === 'compensating' || compensating > 0)) out.push(`fan-out: ${id}/${p.n} has ${running} elements running while a compensation runs`);
    }
    if (compensating > 0 && processing > 0) out.push(`compensation: ${id} runs a compensation while ${processing} step(s) are in flight`);
    // Child tasks (decision 0019 §9.1): a child step is processed only if its child completed; no
    // compensation of the parent runs while a child it cancels has not ended.
    for (const p of t.plan) {
      if (p.k !== 'c') continue;
      const r = t.recs.get(p.n)!;
      const childStatus = r.child ? after.get(r.child.id)?.view.status : undefined;
      if (r.status === 'processed' && childStatus !== 'completed') out.push(`child: ${id}/${p.n} is processed but its child ${r.child?.id ?? '(none)'} is ${childStatus ?? 'missing'}`);
      if (r.status === 'waiting' && status === 'compensating' && compensating > 0) out.push(`child: ${id} compensates a step while its child step ${p.n} still waits for its child to be cancelled`);
    }
    if (t.link && TERMINAL.has(status) && t.notified === undefined && !deadlines.has(`${id}|#parent`)) {
      out.push(`child: ${id} ended ${status} but neither notified its parent ${t.link.parent} nor has a notice in the deadline index`);
    }

    // Alerts: a failed task has the alert of every step that failed it open; the transition that failed
    // it put its alert in the outbox, raised then.
    if (status === 'failed' || status === 'compensation_failed') {
      const ids = expectedAlerts(t);
      if (ids.length === 0) out.push(`alert: ${id} is ${status} but no step is compensation_failed`);
      for (const alertId of ids) if (!alerts.open.has(alertId)) out.push(`alert: ${id} is ${status} but the open alerts lack ${alertId}`);
      if (old?.view.status !== status && !alerts.outbox.some((e) => ids.includes(e.alert.id) && e.alert.raisedAt === t.view.finishedAt)) {
        out.push(`alert: ${id} became ${status} at ${t.view.finishedAt} but the outbox has none of ${ids.join(', ')} raised then`);
      }
    }

    // Liveness: the supervisor has something to act on for every task not finished — but a task waiting for
    // admission (decision 0024), which the end of an active task of its client and bucket admits (checked:
    // that task is in the set, so it has a member of its own).
    const waitsForAdmission = t.view.admission === 'waiting';
    if (!TERMINAL.has(status) && !waitsForAdmission && ![...deadlines.keys()].some((m) => m.startsWith(`${id}|`))) {
      out.push(`liveness: ${id} is ${status} but has no member in the deadline index (nothing will ever move it on)`);
    }
  }
  return out;
}
