/**
 * Dispatch limits per agent type (decision 0020): each limited agent type's limiter — its waiting line,
 * permits, rate and pauses — in a Redis slot of its own, changed only by the limiter scripts, and the
 * registry of limited agent types every process's LimitCache reads. Nothing in the actors calls these
 * yet (decision 0020 §10: increments 3 and 4 wire them into the transitions, the scheduler and the API).
 */
import { z } from 'zod';
import { NameSchema, errorMessage } from '@triad/protocol';
import { type Logger } from '@triad/telemetry';
import type { RedisClient } from './client.js';
import { LIMITER_PARTS, keys, type Keys } from './keys.js';
import { runScript } from './scripts.js';

/** A permit counts until its attempt's complete-by plus this (PERMIT_GRACE_MS, decision 0020 §1.3). */
export const PERMIT_GRACE_MS = 1_000;
/** A waiting step's level improves by one every this long (PRIORITY_AGING_MS, decision 0020 §4.1). */
export const PRIORITY_AGING_MS = 30_000;
/** How often a LimitCache reads the registry's version (TRIAD_LIMITS_REFRESH_MS' default). */
export const DEFAULT_LIMITS_REFRESH_MS = 1_000;
/** The longest key value kept as is; a longer one (or one with a control byte) is `#` + its SHA-1 (§1.1). */
export const MAX_LIMIT_KEY_BYTES = 128;

/** A limit of one agent type (decision 0020 §1.1); validated by the API's schema before it gets here. */
export interface LimitConfig {
  concurrency?: number;
  ratePerSecond?: number;
  /** Grants let through at once above the rate; default 1. */
  burst?: number;
  /** The path into the task input that makes a step's key (the segments after `input.`). */
  key?: string[];
  perKeyConcurrency?: number;
  perKeyRatePerSecond?: number;
  perKeyBurst?: number;
  /** A Retry-After pauses only the throttled step's key. */
  pausePerKey?: boolean;
}

const LimitConfigSchema = z.object({
  concurrency: z.number().int().min(1).optional(),
  ratePerSecond: z.number().positive().optional(),
  burst: z.number().int().min(1).optional(),
  key: z.array(z.string().min(1)).min(1).max(8).optional(),
  perKeyConcurrency: z.number().int().min(1).optional(),
  perKeyRatePerSecond: z.number().positive().optional(),
  perKeyBurst: z.number().int().min(1).optional(),
  pausePerKey: z.boolean().optional(),
});

/** A registry entry: a limit (with when it was set), a pause-only limiter, or a cleared one still draining. */
export const RegistryEntrySchema = z.union([
  LimitConfigSchema.extend({ setAt: z.number().int().nonnegative() }).strict(),
  z.object({ pausedUntil: z.number().nonnegative() }).strict(),
  z.object({ draining: z.literal(true) }).strict(),
]);
export type RegistryEntry = z.output<typeof RegistryEntrySchema>;

/** A step waiting for a permit: what the transition that queued it hands the limiter (decision 0020 §2.2). */
export interface QueueItem {
  /** `<taskId>|<phase>|<kind>|<n>`: the fencing value of the whole protocol. */
  ticket: string;
  taskId: string;
  /** The step name, or `<step>#<i>` for a fan-out element. */
  phase: string;
  kind: 'run' | 'compensate';
  /** The step's key value as rendered by §1.1 (`""` without a keyed limit). */
  key: string;
  /** 1 (highest) … 5. */
  priority: number;
  /** When it began waiting (kept across a re-queue after a throttle or a late start). */
  firstAt: number;
  /** Its attempt's budget: the permit expires at grant time + this. */
  budgetMs: number;
}

/** What a transition asks of one limiter, applied in this order (limitApply.lua). */
export interface LimiterOps {
  /** Permits to end: an attempt reported, or a dead ticket; `requeue`: a late start goes back to its place. */
  release?: { ticket: string; requeue?: boolean }[];
  /** Tickets whose phase moved on (waiting, or granted and never to be started). */
  dequeue?: string[];
  /** A throttle's pause: of the agent type, or (`key`) of one key; until epoch ms (at most an hour ahead). */
  pause?: { key?: string; until: number }[];
  queue?: QueueItem[];
  /** Apply without running the grant loop (the supervisor's dequeues: grants are schedulers' to start). */
  noGrant?: boolean;
}

const GrantSchema = z.object({
  ticket: z.string(),
  taskId: z.string(),
  phase: z.string(),
  kind: z.enum(['run', 'compensate']),
  completeBy: z.number(),
  waitedMs: z.number(),
});
/** A permit granted to a ticket: the caller starts the phase (startQueued) with this complete-by. */
export type Grant = z.output<typeof GrantSchema>;

const LimiterReplySchema = z.object({
  // cjson encodes an empty Lua table as {}.
  grants: z.preprocess((v): unknown => (Array.isArray(v) ? v : []), z.array(GrantSchema)),
  wakeAt: z.number().optional(),
  waiting: z.number(),
  limited: z.boolean(),
  /** Permits this call freed at their expiry rather than by a release (a crash, a lost release, a silent agent). */
  reclaimed: z.number().optional(),
});
export type LimiterReply = z.output<typeof LimiterReplySchema>;

const KeyStatsSchema = z.object({
  key: z.string(),
  inFlight: z.number(),
  waiting: z.number(),
  oldestWaitMs: z.number().optional(),
  pausedUntil: z.number().optional(),
  blockedUntil: z.union([z.number(), z.literal('concurrency')]).optional(),
});
const LimiterStatsSchema = z.object({
  limited: z.boolean(),
  inFlight: z.number(),
  waiting: z.number(),
  oldestWaitMs: z.number().optional(),
  ratePerSecondNow: z.number(),
  pausedUntil: z.number().optional(),
  wakeAt: z.number().optional(),
  granted: z.number(),
  released: z.number(),
  reclaimed: z.number(),
  throttled: z.number(),
  keys: z.preprocess((v): unknown => (Array.isArray(v) ? v : []), z.array(KeyStatsSchema)),
});
export type LimiterStats = z.output<typeof LimiterStatsSchema>;

const PlaceSchema = z.union([
  z.object({ found: z.literal(false) }),
  z.object({ found: z.literal(true), granted: z.literal(true), completeBy: z.number() }),
  z.object({ found: z.literal(true), place: z.number(), approximate: z.boolean(), level: z.number(), key: z.string(), blockedUntil: z.union([z.number(), z.literal('concurrency')]).optional(), pausedUntil: z.number().optional() }),
]);
export type LimiterPlace = z.output<typeof PlaceSchema>;

const RetireSchema = z.object({ retired: z.boolean(), reason: z.string().optional() });

/** The limit as the limiter script stores it (cfg hash fields, _limiter.lua). */
export function compactLimit(l: LimitConfig): Record<string, unknown> {
  const c: Record<string, unknown> = {};
  if (l.concurrency !== undefined) c['c'] = l.concurrency;
  if (l.ratePerSecond !== undefined) {
    c['ri'] = 1_000 / l.ratePerSecond;
    c['rb'] = l.burst ?? 1;
  }
  if (l.key !== undefined) c['k'] = l.key;
  if (l.perKeyConcurrency !== undefined) c['kc'] = l.perKeyConcurrency;
  if (l.perKeyRatePerSecond !== undefined) {
    c['kri'] = 1_000 / l.perKeyRatePerSecond;
    c['kb'] = l.perKeyBurst ?? 1;
  }
  if (l.pausePerKey) c['pk'] = true;
  return c;
}

function parseJson<T>(schema: z.ZodType<T>, reply: unknown, what: string): T {
  const text = Buffer.isBuffer(reply) ? reply.toString('utf8') : String(reply);
  const parsed = schema.safeParse(JSON.parse(text));
  if (!parsed.success) throw new Error(`${what}: the limiter script answered ${text.slice(0, 200)}, which is not what this version expects (${parsed.error.message}); are two Triad versions sharing this Redis?`);
  return parsed.data;
}

/** A key value must be what §1.1 renders: at most 128 bytes, no byte below 0x20 (the line's separators). */
function checkKey(key: string, ticket: string): void {
  if (Buffer.byteLength(key, 'utf8') > MAX_LIMIT_KEY_BYTES || /[\u0000-\u001f]/.test(key)) {
    throw new Error(`ticket ${ticket}: key ${JSON.stringify(key.slice(0, 40))} is longer than ${MAX_LIMIT_KEY_BYTES} bytes or holds a control character; render it as decision 0020 §1.1 says (such a value becomes "#" and its SHA-1)`);
  }
}

function checkTicket(t: string): void {
  if (t.length === 0 || t.length > 600) throw new Error(`ticket ${JSON.stringify(t.slice(0, 40))}: expected <taskId>|<phase>|<kind>|<n>`);
}

/** The index of the limiter's `state` hash in its keys (keys.ts LIMITER_PARTS). */
const LIMITER_STATE = LIMITER_PARTS.indexOf('state');

export class LimitStore {
  readonly keys: Keys;

  constructor(
    readonly redis: RedisClient,
    readonly namespace: string,
  ) {
    this.keys = keys(namespace);
  }

  private limiterKeys(agent: string): readonly string[] {
    return this.keys.limiter(agent).all;
  }

  /** Sets (or with undefined removes) an agent type's limit in its limiter and runs the grant loop. */
  async configure(agent: string, limit: LimitConfig | undefined, now: number): Promise<LimiterReply> {
    const arg = limit === undefined ? '' : JSON.stringify(compactLimit(LimitConfigSchema.parse(limit)));
    return parseJson(LimiterReplySchema, await runScript(this.redis, 'limitConfigure', this.limiterKeys(agent), [now, arg]), `configure the limiter of ${agent}`);
  }

  /** Releases, dequeues, pauses and queues (in that order), then runs the grant loop unless `noGrant`. */
  async apply(agent: string, ops: LimiterOps, now: number): Promise<LimiterReply> {
    const wire: Record<string, unknown> = {};
    if (ops.release?.length) {
      for (const r of ops.release) checkTicket(r.ticket);
      wire['release'] = ops.release.map((r) => [r.ticket, r.requeue === true]);
    }
    if (ops.dequeue?.length) {
      for (const t of ops.dequeue) checkTicket(t);
      wire['dequeue'] = ops.dequeue;
    }
    if (ops.pause?.length) wire['pause'] = ops.pause.map((p) => (p.key === undefined ? { u: p.until } : { k: p.key, u: p.until }));
    if (ops.queue?.length) {
      wire['queue'] = ops.queue.map((q) => {
        checkTicket(q.ticket);
        checkKey(q.key, q.ticket);
        if (!Number.isInteger(q.priority) || q.priority < 1 || q.priority > 5) throw new Error(`ticket ${q.ticket}: priority ${q.priority} is not a whole number from 1 to 5`);
        return { t: q.ticket, task: q.taskId, s: q.phase, c: q.kind, k: q.key, p: q.priority, f: Math.floor(q.firstAt), b: Math.ceil(q.budgetMs) };
      });
    }
    if (ops.noGrant) wire['noGrant'] = true;
    return parseJson(LimiterReplySchema, await runScript(this.redis, 'limitApply', this.limiterKeys(agent), [now, JSON.stringify(wire)]), `apply to the limiter of ${agent}`);
  }

  /** Runs the grant loop (a wakeAt came). */
  async pump(agent: string, now: number): Promise<LimiterReply> {
    return parseJson(LimiterReplySchema, await runScript(this.redis, 'limitPump', this.limiterKeys(agent), [now]), `pump the limiter of ${agent}`);
  }

  /** A waiting ticket's place in line (read-only); with `now`, also the pause ahead of it (pausedUntil). */
  async place(agent: string, ticket: string, now?: number): Promise<LimiterPlace> {
    return parseJson(PlaceSchema, await runScript(this.redis, 'limitPlace', this.limiterKeys(agent), now === undefined ? [ticket] : [ticket, now]), `the place of ${ticket}`);
  }

  /** What the limiter holds now, with the `keys` keys that have the most waiting (read-only). */
  async stats(agent: string, now: number, keys = 0): Promise<LimiterStats> {
    return parseJson(LimiterStatsSchema, await runScript(this.redis, 'limitStats', this.limiterKeys(agent), [now, Math.max(0, Math.min(100, Math.floor(keys)))]), `the stats of the limiter of ${agent}`);
  }

  /** Deletes an empty limiter (no limit, nothing waiting, no live permit, no pause ahead). */
  async retire(agent: string, now: number): Promise<{ retired: boolean; reason?: string }> {
    const r = parseJson(RetireSchema, await runScript(this.redis, 'limitRetire', this.limiterKeys(agent), [now]), `retire the limiter of ${agent}`);
    return r.reason === undefined ? { retired: r.retired } : { retired: r.retired, reason: r.reason };
  }

  private async register(op: 'set' | 'drain' | 'pause' | 'remove', agent: string, arg: string): Promise<boolean> {
    NameSchema.parse(agent);
    const r = await runScript(this.redis, 'limitRegister', [this.keys.limits.agents, this.keys.limits.version], [op, agent, arg]);
    return Number(r) === 1;
  }

  /** Sets a limit (decision 0020 §1.7): the limiter first, then the registry, so a process that learns "limited" finds it. */
  async set(agent: string, limit: LimitConfig, now: number): Promise<LimiterReply> {
    const l = LimitConfigSchema.parse(limit);
    const reply = await this.configure(agent, l, now);
    await this.register('set', agent, JSON.stringify({ ...l, setAt: now }));
    return reply;
  }

  /** Clears a limit: the registry says `draining` first (new steps stop queueing), then the limiter lets every waiting step go. */
  async clear(agent: string, now: number): Promise<{ cleared: boolean; reply: LimiterReply }> {
    const had = (await this.redis.hget(this.keys.limits.agents, agent)) !== null;
    await this.register('drain', agent, '');
    return { cleared: had, reply: await this.configure(agent, undefined, now) };
  }

  /** A pause-only entry for an agent type without a limit (only when none, or one ending earlier, is there). */
  async registerPause(agent: string, until: number): Promise<boolean> {
    return this.register('pause', agent, String(Math.ceil(until)));
  }

  /** Removes an agent type's entry if it is still exactly `raw` (after retiring its limiter). */
  async unregister(agent: string, raw: string): Promise<boolean> {
    return this.register('remove', agent, raw);
  }

  /** When the limiter asked to be looked at again (its stored wakeAt), if it did: one HGET (the supervisor's fallback). */
  async wakeAt(agent: string): Promise<number | undefined> {
    const state = this.keys.limiter(agent).all[LIMITER_STATE];
    const v = state === undefined ? null : await this.redis.hget(state, 'wakeAt');
    return v === null ? undefined : Number(v);
  }

  /** The registry's version (bumped by every change). */
  async version(): Promise<number> {
    return Number((await this.redis.get(this.keys.limits.version)) ?? 0);
  }

  /** Every registry entry that parses, with its raw JSON (for `unregister`); the others are reported to `onInvalid`. */
  async entries(onInvalid?: (agent: string, problem: string) => void): Promise<Map<string, { entry: RegistryEntry; raw: string }>> {
    const raw = await this.redis.hgetall(this.keys.limits.agents);
    const out = new Map<string, { entry: RegistryEntry; raw: string }>();
    for (const [agent, json] of Object.entries(raw)) {
      let value: unknown;
      try {
        value = JSON.parse(json);
      } catch (e) {
        onInvalid?.(agent, `not JSON: ${errorMessage(e)}`);
        continue;
      }
      const parsed = RegistryEntrySchema.safeParse(value);
      if (parsed.success) out.set(agent, { entry: parsed.data, raw: json });
      else onInvalid?.(agent, parsed.error.message);
    }
    return out;
  }
}

/**
 * What every process that runs transitions knows of the limits (decision 0020 §1.9): the registry read
 * at most once per refresh interval (one GET of its version; HGETALL only when it changed), and from it
 * the **limited table** each transition that can start a step receives — `{"payment":{"k":["customerId"]},
 * "inventory":{}}`, the agent types with a limit or a pause not yet ended, with the key path of keyed
 * ones; `''` when there is none. A draining entry is never in it.
 */
export class LimitCache {
  private version = -1;
  private checkedAt = Number.NEGATIVE_INFINITY;
  private entries = new Map<string, RegistryEntry>();
  /** Pauses this process applied itself, before the registry shows them. */
  private readonly localPauses = new Map<string, number>();
  private reading: Promise<void> | undefined;

  constructor(
    readonly store: LimitStore,
    private readonly o: { refreshMs?: number; log?: Logger } = {},
  ) {}

  /** The next refresh reads the registry whatever the interval (after this process changed it). */
  expire(): void {
    this.checkedAt = Number.NEGATIVE_INFINITY;
  }

  /** An agent type's registry entry as last read. */
  entry(agent: string): RegistryEntry | undefined {
    return this.entries.get(agent);
  }

  /** Whether the limited table at `now` names the agent type (a limit, or a pause not yet ended). */
  isLimited(agent: string, now: number): boolean {
    const e = this.entries.get(agent);
    if (e && !('draining' in e) && (!('pausedUntil' in e) || e.pausedUntil > now)) return true;
    return (this.localPauses.get(agent) ?? 0) > now;
  }

  /** Every agent type in the registry as last read (limited, pause-only or draining). */
  agents(): string[] {
    return [...this.entries.keys()].sort();
  }

  /** Reads the registry again if the refresh interval passed since the last check. */
  async refresh(now: number): Promise<void> {
    if (now - this.checkedAt < (this.o.refreshMs ?? DEFAULT_LIMITS_REFRESH_MS)) return;
    this.reading ??= this.read(now).finally(() => (this.reading = undefined));
    await this.reading;
  }

  private async read(now: number): Promise<void> {
    const version = await this.store.version();
    this.checkedAt = now;
    if (version === this.version) return;
    const entries = await this.store.entries((agent, problem) => this.o.log?.warn({ agent, problem }, 'invalid dispatch limit entry ignored'));
    this.entries = new Map([...entries].map(([agent, e]) => [agent, e.entry]));
    this.version = version;
  }

  /** A pause this process just applied: in its table at once (the registry follows). */
  notePause(agent: string, until: number): void {
    if (until > (this.localPauses.get(agent) ?? 0)) this.localPauses.set(agent, until);
  }

  /** The limited table as of `now` (refreshing first when due). */
  async limitedTable(now: number): Promise<string> {
    await this.refresh(now);
    return this.tableAt(now);
  }

  /** The limited table from what is cached, without reading Redis. */
  tableAt(now: number): string {
    const table: Record<string, { k?: string[] }> = {};
    for (const [agent, e] of this.entries) {
      if ('draining' in e) continue;
      if ('pausedUntil' in e) {
        if (e.pausedUntil > now) table[agent] = {};
        continue;
      }
      table[agent] = e.key ? { k: e.key } : {};
    }
    for (const [agent, until] of this.localPauses) {
      if (until <= now) this.localPauses.delete(agent);
      else table[agent] ??= {};
    }
    const agents = Object.keys(table).sort();
    if (agents.length === 0) return '';
    return JSON.stringify(Object.fromEntries(agents.map((a) => [a, table[a]])));
  }
}
