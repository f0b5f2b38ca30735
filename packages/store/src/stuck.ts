/**
 * `triad stuck` (decision 0021 §3.7, settled while building): tasks not finished that are (A) past their
 * bound — created longer ago than their workflow's bound (decision 0009) — or (B) overdue — a deadline-index
 * member (a complete-by, a park's end, a wake-up, a timeout, the task deadline) passed more than `grace` ago
 * with no supervisor acting on it.
 *
 * Read from the indexes every task already has, so a plain task costs nothing more (no `bounds` index):
 * (B) from each bucket's deadline index up to `now − grace` (what the supervisor itself reads: O(overdue));
 * (A) from each bucket's `tasks` index (by createdAt) from its oldest entry up to `now − minBound` (no task
 * younger than the smallest bound can be past its bound), at most `scan` entries per bucket a request, each
 * candidate read with one HMGET. The walk meets the finished tasks retention still keeps, so its cost follows
 * the tasks older than the smallest bound, capped by `scan`; `complete: false` says a bucket had more.
 */
import { isTerminal, type Tags, type TaskSummary } from '@triad/protocol';
import type { RedisClient } from './client.js';
import { parseDeadlineMember, type Keys } from './keys.js';
import { parseTags } from './task-view.js';

export interface StuckQuery {
  now: number;
  limit: number;
  /** Entries read per bucket and index at most. */
  scan: number;
  /** A deadline is overdue once it passed more than this long ago (the supervision interval + its lease + 1 s). */
  graceMs: number;
  /** The smallest bound a task of the filter can have: (A) reads tasks created before now − minBoundMs. */
  minBoundMs: number;
  /** A workflow version's bound in ms; undefined when it cannot be computed (then (A) does not apply). */
  boundOf: (workflow: string, version: number) => Promise<number | undefined>;
  workflow?: string;
  tags?: Tags;
  client?: string;
}

export interface StuckTask {
  summary: TaskSummary;
  why: 'bound' | 'overdue' | 'both';
  /** createdAt + the workflow's bound. */
  boundAt?: number;
  /** The earliest deadline no supervisor acted on. */
  overdueSince?: number;
  /** How late: past its bound, or past the passed deadline, whichever is longer. */
  lateMs: number;
  /** Its last transition (updatedAt). */
  lastProgressAt: number;
}

export interface StuckResult {
  tasks: StuckTask[];
  /** Index entries read. */
  scanned: number;
  /** False when a bucket had more candidates than `scan`: ask again with a larger one. */
  complete: boolean;
}

const FIELDS = ['workflow', 'version', 'status', 'createdAt', 'updatedAt', 'client', 'tags', 'finishedAt'] as const;

export async function findStuck(redis: RedisClient, k: Keys, q: StuckQuery): Promise<StuckResult> {
  let scanned = 0;
  let complete = true;
  const overdueAt = new Map<string, number>();
  const candidates = new Set<string>();
  const overdueBefore = q.now - q.graceMs;
  const createdBefore = q.now - q.minBoundMs;
  await Promise.all(
    k.buckets.map(async (b) => {
      const [late, old] = await Promise.all([
        redis.zrangebyscore(b.deadlines, '-inf', `(${overdueBefore}`, 'WITHSCORES', 'LIMIT', 0, q.scan),
        createdBefore > 0 ? redis.zrangebyscore(b.tasks, '-inf', `(${createdBefore}`, 'LIMIT', 0, q.scan) : Promise.resolve([] as string[]),
      ]);
      scanned += late.length / 2 + old.length;
      if (late.length / 2 >= q.scan || old.length >= q.scan) complete = false;
      for (let i = 0; i + 1 < late.length; i += 2) {
        const m = parseDeadlineMember(late[i] as string);
        // A finished child's notice to its parent (decision 0019) stands for no wait of its own.
        if (!m || m.step === '#parent') continue;
        const at = Number(late[i + 1]);
        const seen = overdueAt.get(m.taskId);
        if (seen === undefined || at < seen) overdueAt.set(m.taskId, at);
        candidates.add(m.taskId);
      }
      for (const id of old) candidates.add(id);
    }),
  );
  const ids = [...candidates];
  // One command per task, sent together (a pipeline cannot span a cluster's slots).
  const rows = await Promise.all(ids.map((id) => redis.hmget(k.task(id), ...FIELDS).catch(() => undefined)));
  const out: StuckTask[] = [];
  for (let i = 0; i < ids.length; i++) {
    const v = rows[i];
    const taskId = ids[i] as string;
    if (!v || v[0] === null) continue;
    const [workflow, version, status, createdAtS, updatedAtS, client, tagsJson] = v;
    if (!status || isTerminal(status)) continue;
    if (q.workflow !== undefined && workflow !== q.workflow) continue;
    if (q.client !== undefined && (client ?? 'default') !== q.client) continue;
    const tags = parseTags(tagsJson);
    if (q.tags && Object.entries(q.tags).some(([key, value]) => tags?.[key] !== value)) continue;
    const createdAt = Number(createdAtS);
    const updatedAt = Number(updatedAtS ?? createdAtS);
    const bound = await q.boundOf(workflow ?? '', Number(version));
    const boundAt = bound === undefined ? undefined : createdAt + bound;
    const pastBound = boundAt !== undefined && boundAt < q.now;
    const since = overdueAt.get(taskId);
    if (!pastBound && since === undefined) continue;
    const lateMs = Math.max(pastBound ? q.now - boundAt : 0, since !== undefined ? q.now - since : 0);
    out.push({
      summary: { taskId, workflow: workflow ?? '', version: Number(version), status, createdAt, updatedAt, ...(tags ? { tags } : {}), ...(client ? { client } : {}) },
      why: pastBound && since !== undefined ? 'both' : pastBound ? 'bound' : 'overdue',
      ...(boundAt !== undefined ? { boundAt } : {}),
      ...(since !== undefined ? { overdueSince: since } : {}),
      lateMs,
      lastProgressAt: updatedAt,
    });
  }
  out.sort((x, y) => y.lateMs - x.lateMs || (x.summary.taskId < y.summary.taskId ? -1 : 1));
  return { tasks: out.slice(0, q.limit), scanned, complete };
}
