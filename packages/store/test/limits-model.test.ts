// Decision 0020 §9.3: a fast-check property test of the limiter's grant loop against a model written from
// the decision's §1.2 (GCRA), §1.3 (permits expiring at complete-by + 1 s), §1.5 (pauses) and §4 (levels
// with aging, keys in turn through lazily cleaned rings, first come first served within a key, blocked
// keys) — not from the Lua. Random queues (new and repeated), releases (with and without requeue),
// dequeues, pauses and clock steps: after every one, the grants (tickets in order), wakeAt, the waiting
// count and the live permits must be identical. A calm phase then checks that nothing is left behind.
// Runs keep under 64 tickets, so the per-call caps never bind here (limits.test.ts covers them).
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { LimitStore, type LimitConfig, type QueueItem } from '../src/index.js';
import { usePrivateRedis } from './redis-server.js';

const r = usePrivateRedis('triad-limits-model-test');
const T0 = 1_700_000_000_000;
const GRACE = 1_000;
const AGING = 30_000;
const MAX_PAUSE = 3_600_000;

interface MTicket {
  item: QueueItem;
  q: number;
  level?: number;
  granted?: number;
}

/** The limiter as decision 0020 describes it. */
class Model {
  now = T0;
  seq = 0;
  tat = 0;
  pause = 0;
  readonly tickets = new Map<string, MTicket>();
  readonly permits = new Map<string, number>();
  readonly inKey = new Map<string, number>();
  readonly keyTat = new Map<string, number>();
  readonly keyPause = new Map<string, number>();
  readonly rings: string[][] = [[], [], [], [], []];
  readonly inRing = new Set<string>();
  readonly blocked = new Map<string, number>();

  constructor(readonly cfg: LimitConfig) {}

  private get interval(): number | undefined {
    return this.cfg.ratePerSecond ? 1_000 / this.cfg.ratePerSecond : undefined;
  }
  private get keyInterval(): number | undefined {
    return this.cfg.perKeyRatePerSecond ? 1_000 / this.cfg.perKeyRatePerSecond : undefined;
  }

  tick(at: number): number {
    this.now = Math.max(this.now, at);
    return this.now;
  }

  levelOf(t: MTicket): number {
    return Math.min(t.item.priority, Math.max(1, t.item.priority - Math.floor((this.now - t.item.firstAt) / AGING)));
  }

  waiting(): MTicket[] {
    return [...this.tickets.values()].filter((t) => t.granted === undefined);
  }

  /** A key's waiting tickets at a level, first come first served (firstAt, then arrival). */
  line(level: number, key: string): MTicket[] {
    return this.waiting()
      .filter((t) => t.level === level && t.item.key === key)
      .sort((a, b) => a.item.firstAt - b.item.firstAt || a.q - b.q);
  }

  live(): number[] {
    return [...this.permits.values()].filter((e) => e + GRACE > this.now).sort((a, b) => a - b);
  }

  private ringPush(level: number, key: string): void {
    const flag = `${level}\0${key}`;
    if (this.inRing.has(flag)) return;
    this.inRing.add(flag);
    this.rings[level - 1]!.push(key);
  }

  private unblock(key: string): void {
    this.blocked.delete(key);
    for (let l = 1; l <= 5; l++) if (this.line(l, key).length > 0) this.ringPush(l, key);
  }

  private block(key: string, until: number): void {
    const cur = this.blocked.get(key);
    if (cur === undefined || until > cur) this.blocked.set(key, until);
  }

  /** A key with nothing waiting and no permit is nobody's turn: it leaves `blocked` (it is in no ring). */
  private settle(key: string): void {
    if ((this.inKey.get(key) ?? 0) === 0 && !this.waiting().some((t) => t.item.key === key)) this.blocked.delete(key);
  }

  private enter(T: string, t: MTicket): void {
    t.granted = undefined;
    t.level = this.levelOf(t);
    this.tickets.set(T, t);
    if (!this.blocked.has(t.item.key)) this.ringPush(t.level, t.item.key);
  }

  private removePermit(T: string, t: MTicket): void {
    if (!this.permits.delete(T)) return;
    this.inKey.set(t.item.key, (this.inKey.get(t.item.key) ?? 0) - 1);
    if (this.blocked.get(t.item.key) === Infinity) this.unblock(t.item.key);
  }

  queue(item: QueueItem, grants: string[]): void {
    const t = this.tickets.get(item.ticket);
    if (t?.granted !== undefined) {
      const exp = this.permits.get(item.ticket);
      if (exp !== undefined && exp + GRACE > this.now) grants.push(item.ticket);
      else {
        this.removePermit(item.ticket, t);
        this.enter(item.ticket, t);
      }
    } else if (!t) this.enter(item.ticket, { item, q: ++this.seq });
  }

  release(T: string, requeue: boolean): void {
    const t = this.tickets.get(T);
    if (!t) return;
    if (t.granted !== undefined) {
      this.removePermit(T, t);
      if (requeue) this.enter(T, t);
      else {
        this.tickets.delete(T);
        this.settle(t.item.key);
      }
    } else if (!requeue) {
      this.tickets.delete(T);
      this.settle(t.item.key);
    }
  }

  dequeue(T: string): void {
    const t = this.tickets.get(T);
    if (!t) return;
    if (t.granted !== undefined) this.removePermit(T, t);
    this.tickets.delete(T);
    this.settle(t.item.key);
  }

  pauseFor(key: string | undefined, until: number): void {
    const u = Math.min(until, this.now + MAX_PAUSE);
    if (key === undefined) this.pause = Math.max(this.pause, u);
    else {
      this.keyPause.set(key, Math.max(this.keyPause.get(key) ?? 0, u));
      if (this.waiting().some((t) => t.item.key === key)) this.block(key, u);
      else this.settle(key);
    }
  }

  private housekeeping(): void {
    // Reclaim lapsed permits, by expiry then ticket.
    const lapsed = [...this.permits].filter(([, e]) => e + GRACE <= this.now).sort((a, b) => a[1] - b[1] || (a[0] < b[0] ? -1 : 1));
    for (const [T] of lapsed) {
      const t = this.tickets.get(T)!;
      this.removePermit(T, t);
      this.tickets.delete(T);
      this.settle(t.item.key);
    }
    // Promote, by the time each was due then ticket.
    const due = this.waiting()
      .filter((t) => t.level! > 1)
      .map((t) => ({ t, at: t.item.firstAt + (t.item.priority - t.level! + 1) * AGING }))
      .filter((x) => x.at <= this.now)
      .sort((a, b) => a.at - b.at || (a.t.item.ticket < b.t.item.ticket ? -1 : 1));
    for (const { t } of due) {
      t.level = this.levelOf(t);
      if (!this.blocked.has(t.item.key)) this.ringPush(t.level, t.item.key);
    }
    // Unblock keys whose time came, by time then key.
    const free = [...this.blocked].filter(([, at]) => at <= this.now).sort((a, b) => a[1] - b[1] || (a[0] < b[0] ? -1 : 1));
    for (const [key] of free) this.unblock(key);
  }

  /** §4.3: returns wakeAt; appends the grants. */
  loop(grants: string[]): number | undefined {
    this.housekeeping();
    const I = this.interval;
    const KI = this.keyInterval;
    const tau = I ? ((this.cfg.burst ?? 1) - 1) * I : 0;
    const ktau = KI ? ((this.cfg.perKeyBurst ?? 1) - 1) * KI : 0;
    let wake: number | undefined;
    let stopped = false;
    let pops = 0;
    while (grants.length < 64 && pops < 256) {
      if (this.pause > this.now) {
        wake = this.pause;
        stopped = true;
        break;
      }
      const live = this.live();
      if (this.cfg.concurrency !== undefined && live.length >= this.cfg.concurrency) {
        wake = live[0]! + GRACE;
        stopped = true;
        break;
      }
      if (I !== undefined) {
        const allowAt = Math.max(this.tat, this.now) - tau;
        if (allowAt > this.now) {
          wake = allowAt;
          stopped = true;
          break;
        }
      }
      const level = this.rings.findIndex((ring) => ring.length > 0) + 1;
      if (level === 0) {
        const finite = [...this.blocked.values()].filter((v) => v !== Infinity).sort((a, b) => a - b);
        wake = finite[0];
        if ([...this.blocked.values()].includes(Infinity) && live.length > 0 && (wake === undefined || live[0]! + GRACE < wake)) wake = live[0]! + GRACE;
        stopped = true;
        break;
      }
      const key = this.rings[level - 1]!.shift()!;
      pops++;
      this.inRing.delete(`${level}\0${key}`);
      const line = this.line(level, key);
      const first = line[0];
      if (!first || this.blocked.has(key)) continue;
      let blockUntil: number | undefined;
      if (this.cfg.perKeyConcurrency !== undefined && (this.inKey.get(key) ?? 0) >= this.cfg.perKeyConcurrency) blockUntil = Infinity;
      else if (KI !== undefined) {
        const a = Math.max(this.keyTat.get(key) ?? 0, this.now) - ktau;
        if (a > this.now) blockUntil = a;
      }
      if (blockUntil === undefined && (this.keyPause.get(key) ?? 0) > this.now) blockUntil = this.keyPause.get(key);
      if (blockUntil !== undefined) {
        this.block(key, blockUntil);
        continue;
      }
      if (line.length > 1) this.ringPush(level, key);
      first.granted = this.now + first.item.budgetMs;
      first.level = undefined;
      this.permits.set(first.item.ticket, first.granted);
      this.inKey.set(key, (this.inKey.get(key) ?? 0) + 1);
      if (I !== undefined) this.tat = Math.max(this.tat, this.now) + I;
      if (KI !== undefined) this.keyTat.set(key, Math.max(this.keyTat.get(key) ?? 0, this.now) + KI);
      grants.push(first.item.ticket);
    }
    if (!stopped) wake = this.now;
    if (this.waiting().length === 0) wake = undefined;
    return wake === undefined ? undefined : Math.ceil(wake);
  }
}

type Op =
  | { type: 'queue'; key: number; priority: 1 | 3 | 5; budget: number }
  | { type: 'again'; pick: number }
  | { type: 'release'; pick: number; requeue: boolean }
  | { type: 'dequeue'; pick: number }
  | { type: 'pause'; key: number | undefined; ms: number }
  | { type: 'advance'; ms: number }
  | { type: 'pump' };

const KEYS = ['', 'k1', 'k2', 'k3'];

const opArb: fc.Arbitrary<Op> = fc.oneof(
  { weight: 5, arbitrary: fc.record({ type: fc.constant('queue' as const), key: fc.integer({ min: 0, max: 3 }), priority: fc.constantFrom(1 as const, 3 as const, 5 as const), budget: fc.constantFrom(300, 1_000, 5_000) }) },
  { weight: 1, arbitrary: fc.record({ type: fc.constant('again' as const), pick: fc.nat() }) },
  { weight: 3, arbitrary: fc.record({ type: fc.constant('release' as const), pick: fc.nat(), requeue: fc.boolean() }) },
  { weight: 1, arbitrary: fc.record({ type: fc.constant('dequeue' as const), pick: fc.nat() }) },
  { weight: 1, arbitrary: fc.record({ type: fc.constant('pause' as const), key: fc.option(fc.integer({ min: 0, max: 3 }), { nil: undefined }), ms: fc.constantFrom(0, 100, 2_000) }) },
  { weight: 3, arbitrary: fc.record({ type: fc.constant('advance' as const), ms: fc.constantFrom(0, 1, 50, 100, 999, 1_000, 1_001, 2_000, 30_000, 61_000) }) },
  { weight: 1, arbitrary: fc.record({ type: fc.constant('pump' as const) }) },
);

const limitArb: fc.Arbitrary<LimitConfig> = fc
  .record({
    concurrency: fc.option(fc.integer({ min: 1, max: 3 }), { nil: undefined }),
    rate: fc.option(fc.record({ ratePerSecond: fc.constantFrom(1, 2, 10), burst: fc.integer({ min: 1, max: 2 }) }), { nil: undefined }),
    perKeyConcurrency: fc.option(fc.constant(1), { nil: undefined }),
    perKey: fc.option(fc.record({ perKeyRatePerSecond: fc.constantFrom(2, 5), perKeyBurst: fc.integer({ min: 1, max: 2 }) }), { nil: undefined }),
  })
  .map((x) => {
    const l: LimitConfig = {};
    if (x.concurrency !== undefined) l.concurrency = x.concurrency;
    if (x.rate) Object.assign(l, x.rate);
    if (x.perKeyConcurrency !== undefined || x.perKey) l.key = ['customerId'];
    if (x.perKeyConcurrency !== undefined) l.perKeyConcurrency = x.perKeyConcurrency;
    if (x.perKey) Object.assign(l, x.perKey);
    return l;
  });

let run = 0;

describe('the grant loop against the model of decision 0020', () => {
  it('grants the same tickets in the same order, wakes at the same time, and leaves nothing behind', async () => {
    await fc.assert(
      fc.asyncProperty(limitArb, fc.array(opArb, { minLength: 1, maxLength: 60 }), async (limit, ops) => {
        const store = new LimitStore(r(), `lm${process.pid}-${++run}`);
        const model = new Model(limit);
        const trace: string[] = [`limit ${JSON.stringify(limit)}`];
        const agent = 'payment';
        const check = async (what: string, reply: { grants: { ticket: string }[]; wakeAt?: number; waiting: number }, mGrants: string[], mWake: number | undefined): Promise<void> => {
          trace.push(`${what} → real ${reply.grants.map((g) => g.ticket.split('|')[0]).join(',')} wake ${reply.wakeAt ?? '-'}; model ${mGrants.map((t) => t.split('|')[0]).join(',')} wake ${mWake ?? '-'}`);
          const ctx = trace.join('\n');
          expect(reply.grants.map((g) => g.ticket), ctx).toEqual(mGrants);
          expect(reply.wakeAt, ctx).toBe(mWake);
          expect(reply.waiting, ctx).toBe(model.waiting().length);
          expect((await store.stats(agent, model.now)).inFlight, ctx).toBe(model.live().length);
        };
        const first = await store.configure(agent, limit, model.now);
        await check('configure', first, [], model.loop([]));
        let made = 0;
        const items = new Map<string, QueueItem>();
        const known = (): string[] => [...items.keys()].sort();
        for (const op of ops) {
          const grants: string[] = [];
          let reply;
          switch (op.type) {
            case 'queue': {
              if (made >= 40) continue;
              const it: QueueItem = { ticket: `t${++made}|s|run|1`, taskId: `t${made}`, phase: 's', kind: 'run', key: KEYS[op.key]!, priority: op.priority, firstAt: model.now, budgetMs: op.budget };
              items.set(it.ticket, it);
              model.queue(it, grants);
              reply = await store.apply(agent, { queue: [it] }, model.now);
              break;
            }
            case 'again': {
              const all = known();
              if (all.length === 0) continue;
              const it = items.get(all[op.pick % all.length]!)!;
              model.queue(it, grants);
              reply = await store.apply(agent, { queue: [it] }, model.now);
              break;
            }
            case 'release':
            case 'dequeue': {
              const held = [...model.tickets.keys()].sort();
              if (held.length === 0) continue;
              const T = held[op.pick % held.length]!;
              if (op.type === 'release') model.release(T, op.requeue);
              else model.dequeue(T);
              reply = await store.apply(agent, op.type === 'release' ? { release: [{ ticket: T, requeue: op.requeue }] } : { dequeue: [T] }, model.now);
              break;
            }
            case 'pause': {
              const key = op.key === undefined ? undefined : KEYS[op.key]!;
              model.pauseFor(key, model.now + op.ms);
              reply = await store.apply(agent, { pause: [key === undefined ? { until: model.now + op.ms } : { key, until: model.now + op.ms }] }, model.now);
              break;
            }
            case 'advance':
              model.tick(model.now + op.ms);
              continue;
            case 'pump':
              reply = await store.pump(agent, model.now);
              break;
          }
          await check(JSON.stringify(op), reply, grants, model.loop(grants));
        }
        // Calm: every grant's attempt reports, time moves on, the line empties; then nothing is left.
        for (let i = 0; i < 200 && (model.tickets.size > 0 || model.waiting().length > 0); i++) {
          model.tick(model.now + 1_000);
          const done = [...model.tickets].filter(([, t]) => t.granted !== undefined).map(([T]) => T);
          for (const T of done) model.release(T, false);
          const grants: string[] = [];
          await check('calm: release and grant', await store.apply(agent, { release: done.map((ticket) => ({ ticket })) }, model.now), grants, model.loop(grants));
        }
        expect(model.tickets.size, trace.join('\n')).toBe(0);
        model.tick(model.now + 2 * MAX_PAUSE);
        await store.pump(agent, model.now);
        const keys = store.keys.limiter(agent).all;
        for (const i of [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 16]) expect(await r().exists(keys[i]!), `${keys[i]} left behind\n${trace.join('\n')}`).toBe(0);
      }),
      { numRuns: Number(process.env['TRIAD_FC_RUNS'] ?? 100), seed: Number(process.env['TRIAD_FC_SEED'] ?? Date.now() % 2 ** 31) },
    );
  }, 120_000);
});
