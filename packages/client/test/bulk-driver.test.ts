// Decision 0021 §2.4: the bulk driver's pacing and bookkeeping against a fake API and a fake clock — batches
// of min(50, rate) spaced to the rate, halving on UNAVAILABLE and growing back after 10 clean batches,
// progress figures, resume from a record's cursor, and stop on abort with the batch in flight checkpointed.
// (The real API, and acting once per task through a killed run, are in test/integration/bulk.test.ts.)
import { describe, expect, it } from 'vitest';
import { ErrorCode, TriadError, type BulkOp, type TaskQuery } from '@triad/protocol';
import { runBulkOperation, type BulkApi, type BulkClock, type BulkProgress } from '../src/index.js';

class FakeClock implements BulkClock {
  t = 0;
  sleeps: number[] = [];
  now(): number {
    return this.t;
  }
  sleep(ms: number): Promise<void> {
    this.sleeps.push(ms);
    this.t += ms;
    return Promise.resolve();
  }
}

/** A fake scheduler over `n` matching tasks (ids t-(n-1) … t-0, newest first); the cursor is an index. */
function fakeApi(n: number, o: { failApplyAt?: number[]; clock: FakeClock; applyMs?: number; existing?: Partial<BulkOp> }) {
  const ids = Array.from({ length: n }, (_, i) => `t-${n - 1 - i}`);
  const acted = new Map<string, number>();
  const calls: { query: TaskQuery[]; apply: string[][]; unavailable: number } = { query: [], apply: [], unavailable: 0 };
  let applies = 0;
  let op: BulkOp = { id: 'op-1', action: 'cancel', filter: { tags: { customer: 'c-42' }, status: 'running' }, asOf: 1000, by: 'operator', createdAt: 0, updatedAt: 0, state: 'running', matched: n, batch: 0, acted: 0, already: 0, skipped: 0, missing: 0, failed: 0, ...o.existing };
  const api: BulkApi = {
    start: () => Promise.resolve({ op, resumed: o.existing !== undefined }),
    query: async (q) => {
      await Promise.resolve();
      calls.query.push(q);
      const from = q.cursor ? Number(q.cursor) : 0;
      const page = ids.slice(from, from + (q.limit ?? 50));
      const end = from + page.length;
      return { tasks: page.map((taskId) => ({ taskId, workflow: 'w', version: 1, status: 'running', createdAt: 0, updatedAt: 0 })), ...(end < n ? { next: String(end) } : {}), scanned: page.length };
    },
    apply: async (_id, taskIds) => {
      await Promise.resolve();
      applies++;
      if (o.failApplyAt?.includes(applies)) {
        calls.unavailable++;
        throw new TriadError(ErrorCode.Unavailable, 'no scheduler answered bulk.apply');
      }
      calls.apply.push(taskIds);
      o.clock.t += o.applyMs ?? 0;
      return { results: taskIds.map((taskId) => ({ taskId, outcome: acted.has(taskId) ? ('already' as const) : (acted.set(taskId, 1), 'acted' as const) })) };
    },
    checkpoint: async (req) => {
      await Promise.resolve();
      if (req.batch === op.batch + 1) {
        op = { ...op, batch: req.batch, ...(req.cursor ? { cursor: req.cursor } : {}), acted: op.acted + req.counts.acted, already: op.already + req.counts.already, skipped: op.skipped + req.counts.skipped, missing: op.missing + req.counts.missing, failed: op.failed + req.counts.failed };
        if (!req.cursor) delete (op as { cursor?: string }).cursor;
      }
      return op;
    },
    end: (_id, state) => Promise.resolve((op = { ...op, state })),
  };
  return { api, calls, acted };
}

describe('runBulkOperation', () => {
  it('acts on every task once in batches of 50, spaced to the rate, and reports progress', async () => {
    const clock = new FakeClock();
    const { api, calls, acted } = fakeApi(230, { clock });
    const progress: BulkProgress[] = [];
    const op = await runBulkOperation(api, { action: 'cancel', filter: {}, rate: 50, clock, onProgress: (p) => progress.push(p) });
    expect(op).toMatchObject({ state: 'done', acted: 230, already: 0, batch: 5 });
    expect(calls.apply.map((b) => b.length)).toEqual([50, 50, 50, 50, 30]);
    expect([...acted.keys()]).toHaveLength(230);
    // Every query is of the snapshot: until = asOf, and the record's cursor.
    expect(calls.query.every((q) => q.until === 1000)).toBe(true);
    expect(calls.query.map((q) => q.cursor)).toEqual([undefined, '50', '100', '150', '200']);
    // 50 tasks at 50/s: a second between batch starts (the apply took no time on the fake clock).
    expect(clock.sleeps).toEqual([1000, 1000, 1000, 1000]);
    expect(progress.map((p) => p.done)).toEqual([50, 100, 150, 200, 230]);
    expect(progress[2]).toMatchObject({ perSecond: 50, etaMs: 1600 });
  });

  it('uses batches of the rate below 50 and halves the rate on UNAVAILABLE, retrying the batch; grows back after 10 clean batches', async () => {
    const clock = new FakeClock();
    const { api, calls, acted } = fakeApi(200, { clock, failApplyAt: [2] });
    const rates: number[] = [];
    const op = await runBulkOperation(api, { action: 'cancel', filter: {}, rate: 10, clock, onProgress: (p) => rates.push(p.rate) });
    expect(op).toMatchObject({ state: 'done', acted: 200 });
    expect(calls.unavailable).toBe(1);
    expect(calls.apply[0]).toHaveLength(10);
    expect(calls.apply[1]).toHaveLength(5); // after the halving: batches of 5 at 5/s
    expect(rates[0]).toBe(10);
    expect(rates[1]).toBe(5);
    expect(rates[9]).toBe(5);
    expect(rates[10]).toBeCloseTo(5.5);
    expect([...acted.values()].every((v) => v === 1)).toBe(true);
  });

  it('resumes from the record: its cursor, its counts; a replayed batch answers already', async () => {
    const clock = new FakeClock();
    const { api, calls } = fakeApi(120, { clock, existing: { batch: 1, cursor: '50', acted: 50 } });
    let resumed = false;
    const op = await runBulkOperation(api, { action: 'cancel', filter: {}, opId: 'op-1', clock, onStart: (_op, r) => (resumed = r) });
    expect(resumed).toBe(true);
    expect(calls.query[0]?.cursor).toBe('50');
    expect(op).toMatchObject({ state: 'done', acted: 120, batch: 3 });
  });

  it('stops after the batch in flight when aborted, checkpointed, and marks the operation stopped', async () => {
    const clock = new FakeClock();
    const { api, calls } = fakeApi(500, { clock });
    const ac = new AbortController();
    const op = await runBulkOperation(api, { action: 'cancel', filter: {}, clock, signal: ac.signal, onProgress: (p) => p.done >= 100 && ac.abort() });
    expect(op).toMatchObject({ state: 'stopped', acted: 100, batch: 2, cursor: '100' });
    expect(calls.apply).toHaveLength(2);
  });

  it('does not swallow an error that is not an overload', async () => {
    const clock = new FakeClock();
    const { api } = fakeApi(10, { clock });
    api.apply = () => {
      throw new TriadError(ErrorCode.InvalidState, 'no bulk operation op-1');
    };
    await expect(runBulkOperation(api, { action: 'cancel', filter: {}, clock })).rejects.toThrow(/no bulk operation op-1/);
  });
});
