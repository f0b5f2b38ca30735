/**
 * The driver of a bulk cancel or retry (decision 0021 §2.4): one pass, newest first, over the tasks that
 * matched the operation's filter at its snapshot time, in paced batches — query a page, `bulk.apply` it,
 * checkpoint its cursor and counts — until the end. Whatever drives it (a rerun after a crash, two at
 * once, a request retried after a lost reply) each task is acted on at most once: the fence is in the
 * task. Pure pacing and bookkeeping over an API interface, so its logic is tested with a fake clock.
 */
import { ErrorCode, TriadError, type BulkAction, type BulkApplyReply, type BulkFilter, type BulkOp, type TaskQuery, type TaskQueryReply } from '@triad/protocol';

/** The operations the driver calls (TriadClient's, or a test's fake). */
export interface BulkApi {
  start(req: { opId?: string; action: BulkAction; filter: BulkFilter; step?: string; reason?: string }): Promise<{ op: BulkOp; resumed: boolean }>;
  query(q: TaskQuery): Promise<TaskQueryReply>;
  apply(opId: string, taskIds: string[]): Promise<BulkApplyReply>;
  checkpoint(req: { opId: string; batch: number; cursor?: string; counts: BulkCounts }): Promise<BulkOp>;
  end(opId: string, state: 'done' | 'stopped'): Promise<BulkOp>;
}

export interface BulkCounts {
  acted: number;
  already: number;
  skipped: number;
  missing: number;
  failed: number;
}

export interface BulkClock {
  now(): number;
  sleep(ms: number): Promise<void>;
}

export interface BulkProgress {
  op: BulkOp;
  /** Tasks the operation has gone through (every outcome). */
  done: number;
  /** The pace of the last batches, tasks a second. */
  perSecond: number;
  /** The rate it aims at now (halved on overload, growing back toward `rate`). */
  rate: number;
  /** Time left at that pace, from the count at the snapshot (an estimate). */
  etaMs?: number;
}

export interface BulkRunOptions {
  action: BulkAction;
  /** The tasks it may act on (ignored when resuming `opId`: the record's filter applies). */
  filter: BulkFilter;
  opId?: string;
  /** Tasks a second at most (default 50). */
  rate?: number;
  step?: string;
  reason?: string;
  onProgress?: (p: BulkProgress) => void;
  /** Aborted: the batch in flight finishes and is checkpointed, the operation is marked stopped. */
  signal?: AbortSignal;
  clock?: BulkClock;
  /** Called once the operation is started (or resumed), before its first batch. */
  onStart?: (op: BulkOp, resumed: boolean) => void;
}

const REAL_CLOCK: BulkClock = { now: () => Date.now(), sleep: (ms) => new Promise((r) => setTimeout(r, ms)) };
export const MAX_BATCH = 50;
export const DEFAULT_BULK_RATE = 50;
/** Clean batches after which a halved rate grows by 10% again. */
const RECOVER_AFTER = 10;

export function doneOf(op: Pick<BulkOp, 'acted' | 'already' | 'skipped' | 'missing' | 'failed'>): number {
  return op.acted + op.already + op.skipped + op.missing + op.failed;
}

/** An overload worth slowing down for: the scheduler said so, or did not answer in time. */
function overloaded(e: unknown): boolean {
  return e instanceof TriadError && e.code === ErrorCode.Unavailable;
}

/**
 * Batches of min(50, rate) tasks, one in flight, spaced to `rate` tasks a second. On UNAVAILABLE (or no
 * answer) the rate halves, down to 1/s, and the batch is tried again; after 10 clean batches it grows by
 * 10% back toward `rate`. Returns the operation's final record.
 */
export async function runBulkOperation(api: BulkApi, o: BulkRunOptions): Promise<BulkOp> {
  const clock = o.clock ?? REAL_CLOCK;
  const target = Math.max(1, o.rate ?? DEFAULT_BULK_RATE);
  let rate = target;
  let clean = 0;
  const started = await api.start({ ...(o.opId ? { opId: o.opId } : {}), action: o.action, filter: o.filter, ...(o.step ? { step: o.step } : {}), ...(o.reason ? { reason: o.reason } : {}) });
  let op = started.op;
  o.onStart?.(op, started.resumed);
  if (op.state === 'done') return op; // resumed after its pass reached the end: nothing left to do
  const recent: { at: number; n: number }[] = [];
  for (;;) {
    if (o.signal?.aborted) return api.end(op.id, 'stopped');
    const size = Math.max(1, Math.min(MAX_BATCH, Math.floor(rate)));
    const batchStart = clock.now();
    let page: TaskQueryReply;
    let results: BulkApplyReply;
    try {
      page = await api.query({ ...op.filter, until: op.asOf, limit: size, ...(op.cursor ? { cursor: op.cursor } : {}) });
      results = page.tasks.length > 0 ? await api.apply(op.id, page.tasks.map((t) => t.taskId)) : { results: [] };
    } catch (e) {
      if (!overloaded(e)) throw e;
      rate = Math.max(1, rate / 2);
      clean = 0;
      await clock.sleep(Math.ceil(1000 / rate));
      continue;
    }
    const counts: BulkCounts = { acted: 0, already: 0, skipped: 0, missing: 0, failed: 0 };
    for (const r of results.results) if (r.outcome in counts) counts[r.outcome as keyof BulkCounts]++;
    op = await api.checkpoint({ opId: op.id, batch: op.batch + 1, ...(page.next ? { cursor: page.next } : {}), counts });
    if (++clean >= RECOVER_AFTER && rate < target) {
      rate = Math.min(target, rate * 1.1);
      clean = 0;
    }
    const now = clock.now();
    recent.push({ at: now, n: results.results.length });
    while (recent.length > 10) recent.shift();
    const first = recent[0] as { at: number };
    const span = Math.max(1, now - (recent.length > 1 ? first.at : batchStart));
    const counted = recent.slice(recent.length > 1 ? 1 : 0).reduce((s, x) => s + x.n, 0);
    const perSecond = (counted * 1000) / span;
    const left = Math.max(0, op.matched - doneOf(op));
    o.onProgress?.({ op, done: doneOf(op), perSecond, rate, ...(perSecond > 0 ? { etaMs: Math.round((left / Math.min(perSecond, rate)) * 1000) } : {}) });
    if (!page.next) return api.end(op.id, 'done');
    const wait = Math.ceil((results.results.length / rate) * 1000) - (clock.now() - batchStart);
    if (wait > 0) await clock.sleep(wait);
  }
}
