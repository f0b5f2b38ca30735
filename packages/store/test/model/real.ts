// The real system under test — TaskStore's Lua transitions on a private redis-server — and the reads the
// model-based test compares with the model: each task's record, the deadline index, alerts, and a raw
// snapshot of every key of the namespace (to prove a rejected write changed nothing).
import type { Redis } from 'ioredis';
import { AlertSchema, type Alert, type TaskState } from '@triad/protocol';
import type { PlanStep } from '@triad/core';
import { LimitCache, LimitStore, TaskStore, type LeaseClaim } from '../../src/index.js';
import type { StepRecord } from '../../src/task-view.js';

export interface RealSystem {
  redis: Redis;
  store: TaskStore;
  namespace: string;
  /** The scheduler's task lease: one holder for the whole test, so no transition is refused as LEASE_BUSY. */
  taskLease(taskId: string): LeaseClaim;
}

/**
 * `limited`: agent types with a dispatch limit for the whole run (decision 0020): the store's transitions
 * get them in their limited table, read once here (the registry never changes during a run).
 */
export async function realSystem(redis: Redis, namespace: string, limited: readonly string[] = []): Promise<RealSystem> {
  let cache: LimitCache | undefined;
  if (limited.length > 0) {
    const limits = new LimitStore(redis, namespace);
    for (const agent of limited) await limits.set(agent, { concurrency: 1_000 }, 0);
    cache = new LimitCache(limits, { refreshMs: Number.MAX_SAFE_INTEGER });
    await cache.refresh(0);
  }
  const store = new TaskStore(redis, namespace, cache ? { limits: cache } : {});
  return {
    redis,
    store,
    namespace,
    taskLease: (taskId) => ({ key: store.keys.lease(taskId, 'task'), token: 'model-scheduler.1', ms: 600_000 }),
  };
}

export interface RealTask {
  view: TaskState;
  /** The raw step records (with the fields the view leaves out: reported, comp.reported). */
  recs: Map<string, StepRecord>;
  /** The fan-out elements' records (`s:<step>#<i>`), by that name: only those an element transition wrote. */
  elements: Map<string, StepRecord & { comp?: StepRecord['comp'] }>;
  /** The raw fan-out progress of a step (its record's `fe`). */
  fanOut: Map<string, { n: number; live: number[]; undo?: number[]; compRunning?: number }>;
  /** The plan the task pinned (dependencies, which steps declare a compensation). */
  plan: PlanStep[];
  staleResults: number;
  forgedResults: number;
  endAs?: string;
  /** A child task's link as stored (decision 0019 §5.1) and the last notice delivered. */
  link?: { parent: string; step: string; kind: string; attempt: number; holdUntil: number };
  notified?: string;
}

export async function readTask(sys: RealSystem, taskId: string): Promise<RealTask> {
  const view = await sys.store.getTask(taskId);
  if (!view) throw new Error(`real: task ${taskId} does not exist`);
  const raw = await sys.redis.hgetall(sys.store.keys.task(taskId));
  const recs = new Map<string, StepRecord>();
  for (const s of view.steps) {
    const text = raw[`s:${s.name}`];
    if (text === undefined) throw new Error(`real: task ${taskId} has no record s:${s.name}`);
    recs.set(s.name, JSON.parse(text) as StepRecord);
  }
  const plan = JSON.parse(raw['plan'] ?? '[]') as PlanStep[];
  const elements = new Map<string, StepRecord>();
  const fanOut = new Map<string, { n: number; live: number[]; undo?: number[]; compRunning?: number }>();
  for (const [field, text] of Object.entries(raw)) if (/^s:.+#\d+$/.test(field)) elements.set(field.slice(2), JSON.parse(text) as StepRecord);
  for (const [name, rec] of recs) {
    const fe = (rec as { fe?: { n: number; live: unknown; undo?: unknown; compRunning?: number } }).fe;
    // cjson writes an empty list as {}.
    if (fe) fanOut.set(name, { n: fe.n, live: Array.isArray(fe.live) ? (fe.live as number[]) : [], ...(Array.isArray(fe.undo) ? { undo: fe.undo as number[] } : {}), ...(fe.compRunning !== undefined ? { compRunning: fe.compRunning } : {}) });
  }
  const out: RealTask = { view, recs, elements, fanOut, plan, staleResults: Number(raw['staleResults'] ?? 0), forgedResults: Number(raw['forgedResults'] ?? 0) };
  if (raw['endAs'] !== undefined) out.endAs = raw['endAs'];
  if (raw['parent'] !== undefined) {
    out.link = { parent: raw['parent'], step: raw['parentStep'] ?? '', kind: raw['parentKind'] ?? '', attempt: Number(raw['parentAttempt']), holdUntil: Number(raw['holdUntil']) };
  }
  if (raw['notified'] !== undefined) out.notified = raw['notified'];
  return out;
}

async function zsetMap(redis: Redis, key: string): Promise<Map<string, number>> {
  const flat = await redis.zrange(key, 0, -1, 'WITHSCORES');
  const out = new Map<string, number>();
  for (let i = 0; i + 1 < flat.length; i += 2) out.set(flat[i]!, Number(flat[i + 1]));
  return out;
}

/** An index over all buckets (decision 0015). */
async function indexOf(sys: RealSystem, which: 'deadlines' | 'finished' | 'compact' | 'alertOutbox'): Promise<Map<string, number>> {
  const out = new Map<string, number>();
  for (const b of sys.store.keys.buckets) for (const [m, score] of await zsetMap(sys.redis, b[which])) out.set(m, score);
  return out;
}

export function readDeadlines(sys: RealSystem): Promise<Map<string, number>> {
  return indexOf(sys, 'deadlines');
}

export function readFinished(sys: RealSystem): Promise<Map<string, number>> {
  return indexOf(sys, 'finished');
}

export function readCompact(sys: RealSystem): Promise<Map<string, number>> {
  return indexOf(sys, 'compact');
}

/** An alert as a transition wrote it, checked against the wire schema (the leader publishes it as is). */
function alertOf(json: unknown, where: string): Alert {
  const parsed = AlertSchema.safeParse(json);
  if (!parsed.success) throw new Error(`real: the alert ${JSON.stringify(json)} in ${where} is not a valid Alert message: ${parsed.error.message}`);
  return parsed.data;
}

/** Open alerts (by id) and the outbox (its entries, oldest first, each with its score). */
export async function readAlerts(sys: RealSystem): Promise<{ open: Map<string, Alert>; outbox: { alert: Alert; score: number }[] }> {
  const open = new Map<string, Alert>();
  for (const a of await sys.store.openAlerts()) open.set(a.id, alertOf(a, 'the open alerts'));
  const outbox = [...(await indexOf(sys, 'alertOutbox'))].sort((a, b) => a[1] - b[1]).map(([json, score]) => ({ alert: alertOf(JSON.parse(json), 'the outbox'), score }));
  return { open, outbox };
}

/**
 * Every key of the namespace but the leases (which every transition takes before it checks anything),
 * with its whole value; task hashes without `staleResults` and `forgedResults` (the one thing a stale,
 * or a forged, result changes — compared with the model's counts apart).
 */
export async function snapshot(sys: RealSystem): Promise<Record<string, unknown>> {
  const prefix = sys.store.keys.prefix;
  const names = (await sys.redis.keys(`${prefix}:*`)).filter((k) => !k.includes(':lease:')).sort();
  const out: Record<string, unknown> = {};
  for (const key of names) {
    const type = await sys.redis.type(key);
    if (type === 'hash') {
      const h = await sys.redis.hgetallBuffer(key);
      const fields: Record<string, string> = {};
      for (const f of Object.keys(h).sort()) if (f !== 'staleResults' && f !== 'forgedResults') fields[f] = h[f]!.toString('base64');
      out[key] = fields;
    } else if (type === 'zset') out[key] = await sys.redis.zrange(key, 0, -1, 'WITHSCORES');
    else if (type === 'string') out[key] = await sys.redis.get(key);
    else out[key] = `unexpected type ${type}`;
  }
  return out;
}
