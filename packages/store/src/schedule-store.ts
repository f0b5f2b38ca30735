/**
 * Schedules (decision 0019 §6.2): their records, names, due index and outbox in the `{<ns>:sch}` slot,
 * written only by putSchedule/pauseSchedule/deleteSchedule (the schedulers' API) and fireSchedule (the
 * leader supervisor, fenced by the slot's epoch). Ticks are computed by the caller (`@triad/core`'s
 * schedule module) and passed in; nothing here reads a clock.
 */
import { ErrorCode, TriadError, unpackTrusted, type Schedule, type ScheduleOverlap, type TaskStatus } from '@triad/protocol';
import type { RedisClient } from './client.js';
import { ScriptCode, scriptError } from './codes.js';
import { keys, type Keys } from './keys.js';
import { runScript } from './scripts.js';

/** What `put` stores of a schedule's definition (the rest is the firing's record). */
export interface ScheduleDefinition {
  name: string;
  workflow: string;
  version?: number;
  client: string;
  every?: number;
  cron?: string;
  timezone?: string;
  overlap: ScheduleOverlap;
  /** The input, msgpack-encoded (absent: the tasks get none). */
  input?: Uint8Array;
}

/** A stored schedule with what the leader needs to fire it: the resume time and the raw input. */
export interface StoredSchedule extends Schedule {
  /** When it was last resumed: ticks before it are not caught up. */
  since?: number;
  /** When `every` ticks count from (the creation, or the last replace). */
  anchor: number;
  inputBytes?: Buffer;
}

export type FireAction = 'fired' | 'skipped' | 'noop';

/** A submission a fire recorded and the leader has still to publish. */
export interface ScheduledSubmission {
  /** The outbox field (`<client>|<taskId>`), removed once published. */
  field: string;
  client: string;
  taskId: string;
  bytes: Buffer;
}

export function unknownSchedule(name: string): TriadError {
  return new TriadError(ErrorCode.UnknownSchedule, `no schedule "${name}": list them with triad schedules list`);
}

export class ScheduleStore {
  readonly keys: Keys;

  constructor(
    readonly redis: RedisClient,
    namespace: string,
  ) {
    this.keys = keys(namespace);
  }

  /**
   * Creates a schedule, or with `replace` changes an existing one (its lastTick and counters kept, its
   * generation bumped). `nextTick` undefined: it never fires again. Refuses a taken name without replace.
   */
  async put(d: ScheduleDefinition, nextTick: number | undefined, now: number, replace: boolean): Promise<{ created: boolean; generation: number }> {
    const k = this.keys;
    const fields = { workflow: d.workflow, version: d.version ?? null, client: d.client, every: d.every ?? null, cron: d.cron ?? null, timezone: d.timezone ?? null, overlap: d.overlap };
    const reply = (await runScript(this.redis, 'putSchedule', [k.schedule(d.name), k.scheduleNames, k.schedulesDue], [d.name, JSON.stringify(fields), d.input ?? '', nextTick ?? '', now, replace ? '1' : '0'])) as unknown[];
    const code = Number(reply[0]);
    if (code === ScriptCode.Exists) throw new TriadError(ErrorCode.InvalidState, `schedule "${d.name}" exists: use --replace to change it (replace: true in the SDK)`);
    if (code !== ScriptCode.Ok) throw scriptError(code, `create schedule ${d.name}`);
    return JSON.parse(String(reply[1])) as { created: boolean; generation: number };
  }

  /** Pauses (true) or resumes (false) a schedule; a resume fires from `nextTick` on. Whether it changed. */
  async setPaused(name: string, paused: boolean, nextTick: number | undefined, now: number): Promise<boolean> {
    const k = this.keys;
    const reply = (await runScript(this.redis, 'pauseSchedule', [k.schedule(name), k.schedulesDue], [name, paused ? '1' : '0', nextTick ?? '', now])) as unknown[];
    const code = Number(reply[0]);
    if (code === ScriptCode.UnknownSchedule) throw unknownSchedule(name);
    if (code !== ScriptCode.Ok) throw scriptError(code, `${paused ? 'pause' : 'resume'} schedule ${name}`);
    return (JSON.parse(String(reply[1])) as { changed: boolean }).changed;
  }

  async delete(name: string): Promise<void> {
    const k = this.keys;
    const reply = (await runScript(this.redis, 'deleteSchedule', [k.schedule(name), k.scheduleNames, k.schedulesDue], [name])) as unknown[];
    const code = Number(reply[0]);
    if (code === ScriptCode.UnknownSchedule) throw unknownSchedule(name);
    if (code !== ScriptCode.Ok) throw scriptError(code, `delete schedule ${name}`);
  }

  async get(name: string): Promise<StoredSchedule | undefined> {
    const h = await this.redis.hgetallBuffer(this.keys.schedule(name));
    return parseSchedule(h);
  }

  /** Every schedule, by name. */
  async list(): Promise<StoredSchedule[]> {
    const all = (await this.redis.smembers(this.keys.scheduleNames)).sort();
    const out: StoredSchedule[] = [];
    for (const name of all) {
      const s = await this.get(name);
      if (s) out.push(s);
    }
    return out;
  }

  /** Names of the schedules whose next tick is at or before `now`, earliest first, at most `limit` (O(due)). */
  async due(now: number, limit: number): Promise<string[]> {
    return this.redis.zrangebyscore(this.keys.schedulesDue, '-inf', now, 'LIMIT', 0, limit);
  }

  /** The earliest next tick of any schedule not paused (epoch ms), if any. */
  async nextTick(): Promise<number | undefined> {
    const first = await this.redis.zrange(this.keys.schedulesDue, 0, 0, 'WITHSCORES');
    return first.length >= 2 ? Number(first[1]) : undefined;
  }

  /**
   * Fires one tick (fireSchedule.lua): records it and puts `submission` in the outbox ('fired'), records
   * a skip ('skipped', `skip`), or does nothing ('noop': deleted, paused, changed since `generation`, or
   * the tick is not after the last one). Throws TriadError STALE at a stale epoch.
   */
  async fire(a: { name: string; generation: number; tick: number; taskId: string; submission: Uint8Array; nextTick: number | undefined; missed: number; skip: boolean; now: number; epoch: number }): Promise<{ action: FireAction; reason?: string }> {
    const k = this.keys;
    const reply = (await runScript(
      this.redis,
      'fireSchedule',
      [k.schedule(a.name), k.schedulesDue, k.scheduleEpoch, k.scheduleOutbox],
      [a.name, a.generation, a.tick, a.taskId, a.submission, a.nextTick ?? '', a.missed, a.skip ? '1' : '0', a.now, a.epoch],
    )) as unknown[];
    const code = Number(reply[0]);
    const body = JSON.parse(String(reply[1])) as { action?: FireAction; reason?: string; epoch?: number };
    if (code === ScriptCode.StaleEpoch) throw scriptError(code, `fire schedule ${a.name} at ${a.tick}`, `the slot has seen epoch ${body.epoch ?? '?'}`);
    if (code !== ScriptCode.Ok || !body.action) throw scriptError(code, `fire schedule ${a.name} at ${a.tick}`);
    return { action: body.action, ...(body.reason ? { reason: body.reason } : {}) };
  }

  /** Submissions fired and not yet published, at most `limit`. */
  async outbox(limit: number): Promise<ScheduledSubmission[]> {
    const h = await this.redis.hgetallBuffer(this.keys.scheduleOutbox);
    const out: ScheduledSubmission[] = [];
    for (const [field, bytes] of Object.entries(h)) {
      const i = field.indexOf('|');
      if (i <= 0) continue;
      out.push({ field, client: field.slice(0, i), taskId: field.slice(i + 1), bytes });
      if (out.length >= limit) break;
    }
    return out;
  }

  /** Removes published submissions from the outbox. */
  async published(fields: readonly string[]): Promise<void> {
    if (fields.length > 0) await this.redis.hdel(this.keys.scheduleOutbox, ...fields);
  }

  /** Whether a submission is still in the outbox (its task does not exist yet). */
  async inOutbox(client: string, taskId: string): Promise<boolean> {
    return (await this.redis.hexists(this.keys.scheduleOutbox, `${client}|${taskId}`)) === 1;
  }

  /** A task's status (a plain read of its bucket, not part of any transition), undefined when there is no such task. */
  async taskStatus(taskId: string): Promise<TaskStatus | undefined> {
    const s = await this.redis.hget(this.keys.task(taskId), 'status');
    return (s ?? undefined) as TaskStatus | undefined;
  }
}

type Hash = Record<string, Buffer>;

function str(h: Hash, f: string): string | undefined {
  return h[f]?.toString('utf8');
}
function num(h: Hash, f: string): number | undefined {
  const v = str(h, f);
  return v === undefined || v === '' ? undefined : Number(v);
}

function parseSchedule(h: Hash): StoredSchedule | undefined {
  const name = str(h, 'name');
  if (!name) return undefined;
  const s: StoredSchedule = {
    name,
    workflow: str(h, 'workflow') ?? '',
    client: str(h, 'client') ?? '',
    overlap: str(h, 'overlap') ?? 'skip',
    paused: str(h, 'paused') === '1',
    createdAt: num(h, 'createdAt') ?? 0,
    updatedAt: num(h, 'updatedAt') ?? 0,
    generation: num(h, 'generation') ?? 1,
    anchor: num(h, 'anchor') ?? 0,
    fired: num(h, 'fired') ?? 0,
    skipped: num(h, 'skipped') ?? 0,
    missed: num(h, 'missed') ?? 0,
  };
  const opt = { version: num(h, 'version'), every: num(h, 'every'), nextTick: num(h, 'nextTick'), lastTick: num(h, 'lastTick'), since: num(h, 'since') };
  for (const [f, v] of Object.entries(opt)) if (v !== undefined) Object.assign(s, { [f]: v });
  const cron = str(h, 'cron');
  if (cron) s.cron = cron;
  const tz = str(h, 'timezone');
  if (tz) s.timezone = tz;
  const last = str(h, 'lastTaskId');
  if (last) s.lastTaskId = last;
  if (h['input'] && h['input'].length > 0) {
    s.inputBytes = h['input'];
    s.input = unpackTrusted(h['input']);
  }
  return s;
}
