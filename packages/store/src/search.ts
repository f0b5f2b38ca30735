/**
 * task.query and task.count (decision 0021 §1.3): one read-only script per bucket (querySearch.lua),
 * driven by the bucket's search index when a tag is asked for (cost: the most selective filter's
 * entries in the window), else by its tasks index (cost: the tasks in the window — untagged tasks are
 * not indexed, so that a plain task costs nothing more). The buckets' answers are merged newest first
 * (createdAt, then task id, descending) with an opaque cursor: paging to the end returns every task that
 * matched throughout, once.
 */
import { createHash } from 'node:crypto';
import { DEFAULT_CLIENT_ID, ErrorCode, TriadError, type TaskStatus, type TaskSummary } from '@triad/protocol';
import type { RedisClient } from './client.js';
import type { BucketKeys, Keys } from './keys.js';
import { runScript } from './scripts.js';
import { parseTags } from './task-view.js';

export interface TaskFilter {
  tags?: Readonly<Record<string, string>>;
  status?: TaskStatus;
  workflow?: string;
  client?: string;
  /** createdAt ≥ since (epoch ms). */
  since?: number;
  /** createdAt ≤ until (epoch ms). */
  until?: number;
}

export interface QueryResult {
  tasks: TaskSummary[];
  next?: string;
  /** Index entries the buckets' scripts examined. */
  scanned: number;
  /** Rounds of per-bucket script calls (each at most one call per bucket). */
  rounds: number;
}

export interface CountResult {
  count: number;
  exact: boolean;
  scanned: number;
}

/** A position in the newest-first order: (createdAt, task id). */
interface Pos {
  ts: number;
  id: string;
}

/** Above every task id (TASK_ID_PATTERN is ASCII below 0x7F): a position that takes a whole millisecond. */
const TOP_ID = '\x7f';
const MAX_TS = 9_999_999_999_999;
const MAX_ROUNDS = 4;
/** A count walks at most this many entries per bucket call, and this many in all, before it says "at least". */
const COUNT_CALL_BUDGET = 10_000;
const COUNT_BUDGET = 1_000_000;
const SEP = '\x1f';

/** -1 when a comes before b newest first (a is newer), 1 after, 0 equal. */
function order(a: Pos, b: Pos): number {
  if (a.ts !== b.ts) return a.ts > b.ts ? -1 : 1;
  return a.id === b.id ? 0 : a.id > b.id ? -1 : 1;
}

/** Tags as stored and compared: keys sorted, canonical JSON ('' for none). */
export function canonicalTags(tags: Readonly<Record<string, string>> | undefined): string {
  if (!tags) return '';
  const keys = Object.keys(tags).sort();
  if (keys.length === 0) return '';
  return JSON.stringify(Object.fromEntries(keys.map((k) => [k, tags[k]])));
}

/** The identity of a filter in a cursor: a cursor is refused by a query with other filters. */
function filterHash(f: TaskFilter): string {
  const canonical = JSON.stringify([canonicalTags(f.tags), f.status ?? '', f.workflow ?? '', f.client ?? '', f.since ?? '', f.until ?? '']);
  return createHash('sha256').update(canonical).digest('hex').slice(0, 16);
}

export function encodeCursor(p: Pos, f: TaskFilter): string {
  return Buffer.from(JSON.stringify({ v: 1, at: p.ts, id: p.id, f: filterHash(f) })).toString('base64url');
}

export function decodeCursor(cursor: string, f: TaskFilter): Pos {
  let c: { v?: unknown; at?: unknown; id?: unknown; f?: unknown };
  try {
    c = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8')) as typeof c;
  } catch {
    throw new TriadError(ErrorCode.InvalidMessage, 'this cursor is not one task.query returned: start again without it');
  }
  if (c.v !== 1 || typeof c.at !== 'number' || typeof c.id !== 'string') {
    throw new TriadError(ErrorCode.InvalidMessage, 'this cursor is not one task.query returned: start again without it');
  }
  if (c.f !== filterHash(f)) {
    throw new TriadError(ErrorCode.InvalidMessage, 'this cursor belongs to another query (tags, status, workflow, client, since or until differ): start again without it');
  }
  return { ts: c.at, id: c.id };
}

interface BucketReply {
  m: Pos[];
  n: number;
  exhausted: boolean;
  exact: boolean;
  scanned: number;
  reached?: Pos;
}

export class TaskSearch {
  constructor(
    private readonly redis: RedisClient,
    private readonly keys: Keys,
  ) {}

  /** The script's arguments after the position: how it is driven and by which filters. */
  private driveArgs(f: TaskFilter): (string | number)[] {
    const tags = Object.entries(f.tags ?? {});
    if (tags.length === 0) return ['scan', f.status ?? '', f.workflow ?? '', f.client ?? ''];
    const filters = tags.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([k, v]) => `t${SEP}${k}=${v}`);
    if (f.status) filters.push(`s${SEP}${f.status}`);
    if (f.workflow) filters.push(`w${SEP}${f.workflow}`);
    if (f.client) filters.push(`c${SEP}${f.client}`);
    return ['index', ...filters];
  }

  private async bucket(b: BucketKeys, mode: 'list' | 'count', from: Pos, since: number, want: number, budget: number, drive: (string | number)[]): Promise<BucketReply> {
    const raw = await runScript(this.redis, 'querySearch', [b.search, b.tasks], [mode, b.taskPrefix, from.ts, from.id, since, want, budget, ...drive]);
    const r = JSON.parse(Buffer.isBuffer(raw) ? raw.toString('utf8') : String(raw)) as { m?: unknown; n: number; x: number; e: number; s: number; rt?: number; ri?: string };
    const flat = Array.isArray(r.m) ? (r.m as (number | string)[]) : [];
    const m: Pos[] = [];
    for (let i = 0; i + 1 < flat.length; i += 2) m.push({ ts: Number(flat[i]), id: String(flat[i + 1]) });
    const out: BucketReply = { m, n: r.n, exhausted: r.x === 1, exact: r.e === 1, scanned: r.s };
    if (typeof r.rt === 'number' && typeof r.ri === 'string') out.reached = { ts: r.rt, id: r.ri };
    return out;
  }

  /**
   * One page of tasks matching `f`, newest first, below `cursor`. Every bucket is asked for a few
   * matches; the page is complete down to the newest position a bucket that is not exhausted reached
   * (every bucket examined everything above it); buckets are asked again, for twice as many, while the
   * page is short — at most 4 rounds and max(20·limit, 10,000) entries. A page still short then comes
   * back with `next`.
   */
  async query(f: TaskFilter, limit: number, cursor?: string): Promise<QueryResult> {
    const start: Pos = cursor ? decodeCursor(cursor, f) : { ts: f.until ?? MAX_TS, id: TOP_ID };
    const since = f.since ?? 0;
    const drive = this.driveArgs(f);
    const buckets = this.keys.buckets;
    const state = buckets.map(() => ({ from: start, exhausted: false, matches: [] as Pos[] }));
    let want = Math.ceil((1.5 * limit) / buckets.length) + 1;
    let budget = Math.max(20 * limit, 10_000);
    let scanned = 0;
    let rounds = 0;
    let page: Pos[] = [];
    let complete: Pos | undefined; // everything at or above this position was examined by every bucket
    for (;;) {
      rounds++;
      const active = state.map((s, i) => ({ s, i })).filter(({ s }) => !s.exhausted);
      const perCall = Math.max(want, Math.ceil(budget / Math.max(1, active.length)));
      const replies = await Promise.all(active.map(({ s, i }) => this.bucket(buckets[i] as BucketKeys, 'list', s.from, since, want, perCall, drive)));
      replies.forEach((r, j) => {
        const s = (active[j] as { s: (typeof state)[number] }).s;
        s.matches.push(...r.m);
        scanned += r.scanned;
        budget -= r.scanned;
        if (r.exhausted) s.exhausted = true;
        else if (r.reached) s.from = r.reached;
      });
      complete = undefined;
      for (const s of state) if (!s.exhausted && (!complete || order(s.from, complete) < 0)) complete = s.from;
      const all = state.flatMap((s) => s.matches).sort(order);
      const sure = complete ? all.filter((p) => order(p, complete as Pos) <= 0) : all;
      if (sure.length >= limit || !complete) {
        page = sure.slice(0, limit);
        const more = sure.length > limit || complete !== undefined;
        const last = page[page.length - 1];
        const next = more ? (last && page.length === limit ? last : complete) : undefined;
        return { tasks: await this.summaries(page), ...(next ? { next: encodeCursor(next, f) } : {}), scanned, rounds };
      }
      if (rounds >= MAX_ROUNDS || budget <= 0) {
        page = sure;
        return { tasks: await this.summaries(page), next: encodeCursor(complete, f), scanned, rounds };
      }
      want *= 2;
    }
  }

  /**
   * How many tasks match `f`. One filter (a tag) or none: one index count per bucket, exact. Otherwise
   * each bucket walks its most selective filter, 10,000 entries a call, up to 1,000,000 in all; past
   * that the count is a lower bound (`exact: false`).
   */
  async count(f: TaskFilter): Promise<CountResult> {
    const since = f.since ?? 0;
    const drive = this.driveArgs(f);
    let budget = COUNT_BUDGET;
    let scanned = 0;
    let exact = true;
    const counts = await Promise.all(
      this.keys.buckets.map(async (b) => {
        let from: Pos = { ts: f.until ?? MAX_TS, id: TOP_ID };
        let n = 0;
        for (;;) {
          if (budget <= 0) {
            exact = false;
            return n;
          }
          const r = await this.bucket(b, 'count', from, since, 0, Math.min(COUNT_CALL_BUDGET, budget), drive);
          n += r.n;
          scanned += r.scanned;
          budget -= r.scanned;
          if (r.exact || r.exhausted || !r.reached) return n;
          from = r.reached;
        }
      }),
    );
    return { count: counts.reduce((a, b) => a + b, 0), exact, scanned };
  }

  /** The summaries of one page: one HMGET per task, sent together (never a pipeline across slots). */
  private async summaries(page: Pos[]): Promise<TaskSummary[]> {
    const rows = await Promise.all(
      page.map((p) => this.redis.hmget(this.keys.task(p.id), 'workflow', 'version', 'status', 'createdAt', 'updatedAt', 'finishedAt', 'client', 'tags').catch(() => undefined)),
    );
    const out: TaskSummary[] = [];
    rows.forEach((v, i) => {
      if (!v || v[0] === null) return; // removed by retention since it was found
      const [workflow, version, status, createdAt, updatedAt, finishedAt, client, tags] = v;
      const s: TaskSummary = {
        taskId: (page[i] as Pos).id,
        workflow: workflow ?? '',
        version: Number(version),
        status: status as TaskStatus,
        createdAt: Number(createdAt),
        updatedAt: Number(updatedAt ?? finishedAt ?? createdAt),
        client: client ?? DEFAULT_CLIENT_ID,
      };
      const t = parseTags(tags);
      if (t) s.tags = t;
      out.push(s);
    });
    return out;
  }
}
