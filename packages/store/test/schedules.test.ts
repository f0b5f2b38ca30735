// Schedules' records and scripts (decision 0019 §6.2–6.3; increment 8) on a real redis-server: create and
// replace (lastTick and counters kept, generation bumped), pause/resume, delete, and the leader's
// fireSchedule — a tick fires once (a second fire of it, or of an earlier one, does nothing), a stale
// epoch writes nothing, a fire computed before a change (generation) or during a pause does nothing, a
// skip records the tick without a submission, and fired submissions wait in the outbox until published.
import { describe, expect, it } from 'vitest';
import { encode, isTriadError, scheduleTaskId, unpackTrusted } from '@triad/protocol';
import { ScheduleStore, keys } from '../src/index.js';
import { usePrivateRedis } from './redis-server.js';

const r = usePrivateRedis('triad-schedules-test');

let nsCounter = 0;
const ns = (): string => `sch${process.pid}-${++nsCounter}`;
const T0 = 1_700_000_000_000;

const def = (name = 'nightly', o: { every?: number; cron?: string; input?: unknown; overlap?: 'skip' | 'allow' } = {}) => ({
  name,
  workflow: 'report',
  client: 'web',
  overlap: o.overlap ?? ('skip' as const),
  ...(o.cron !== undefined ? { cron: o.cron, timezone: 'Europe/Paris' } : { every: o.every ?? 10_000 }),
  ...(o.input !== undefined ? { input: encode(o.input) } : {}),
});

async function refusal(p: Promise<unknown>): Promise<{ code: string; message: string }> {
  const e = await p.then(() => undefined, (x: unknown) => x);
  if (!isTriadError(e)) throw new Error(`expected a refusal, got ${String(e)}`);
  return { code: e.code, message: e.message };
}

function fire(store: ScheduleStore, o: { name?: string; generation?: number; tick: number; skip?: boolean; epoch?: number; missed?: number; next?: number }) {
  const name = o.name ?? 'nightly';
  const taskId = scheduleTaskId(name, o.tick);
  return store.fire({ name, generation: o.generation ?? 1, tick: o.tick, taskId, submission: encode({ taskId }), nextTick: o.next ?? o.tick + 10_000, missed: o.missed ?? 0, skip: o.skip ?? false, now: o.tick + 5, epoch: o.epoch ?? 3 });
}

describe('schedule records', () => {
  it('creates, lists, refuses a taken name without replace, and a replace keeps lastTick and the counters', async () => {
    const store = new ScheduleStore(r(), ns());
    expect(await store.put(def('nightly', { input: { region: 'eu' } }), T0 + 10_000, T0, false)).toEqual({ created: true, generation: 1 });
    await store.put(def('hourly', { cron: '0 * * * *' }), T0 + 3_600_000, T0, false);
    const got = await store.get('nightly');
    expect(got).toMatchObject({ name: 'nightly', workflow: 'report', client: 'web', every: 10_000, overlap: 'skip', paused: false, createdAt: T0, anchor: T0, generation: 1, nextTick: T0 + 10_000, fired: 0, skipped: 0, missed: 0, input: { region: 'eu' } });
    expect((await store.list()).map((s) => s.name)).toEqual(['hourly', 'nightly']);
    expect(await store.get('hourly')).toMatchObject({ cron: '0 * * * *', timezone: 'Europe/Paris' });
    expect(await store.due(T0 + 10_000, 100)).toEqual(['nightly']);

    const taken = await refusal(store.put(def('nightly'), T0 + 20_000, T0 + 1, false));
    expect(taken).toEqual({ code: 'INVALID_STATE', message: 'schedule "nightly" exists: use --replace to change it (replace: true in the SDK)' });

    expect((await fire(store, { tick: T0 + 10_000 })).action).toBe('fired');
    // The replace: a cron schedule now, no input; what the firing recorded stays.
    expect(await store.put(def('nightly', { cron: '0 2 * * *' }), T0 + 86_400_000, T0 + 12_000, true)).toEqual({ created: false, generation: 2 });
    const replaced = await store.get('nightly');
    expect(replaced).toMatchObject({ cron: '0 2 * * *', lastTick: T0 + 10_000, lastTaskId: scheduleTaskId('nightly', T0 + 10_000), fired: 1, createdAt: T0, anchor: T0 + 12_000, generation: 2, nextTick: T0 + 86_400_000 });
    expect(replaced?.every).toBeUndefined();
    expect(replaced?.input).toBeUndefined();
  });

  it('pause leaves the due index and a resume comes back from now; delete removes everything; unknown names are refused', async () => {
    const store = new ScheduleStore(r(), ns());
    await store.put(def(), T0 + 10_000, T0, false);
    expect(await store.setPaused('nightly', true, undefined, T0 + 1)).toBe(true);
    expect(await store.setPaused('nightly', true, undefined, T0 + 2)).toBe(false);
    expect(await store.due(T0 + 1_000_000, 100)).toEqual([]);
    expect(await store.nextTick()).toBeUndefined();
    expect(await store.get('nightly')).toMatchObject({ paused: true, generation: 2 });
    expect((await store.get('nightly'))?.nextTick).toBeUndefined();
    // A replace keeps it paused, with no next tick.
    expect(await store.put(def('nightly', { every: 20_000 }), T0 + 20_000, T0 + 3, true)).toEqual({ created: false, generation: 3 });
    expect(await store.get('nightly')).toMatchObject({ paused: true, every: 20_000 });
    expect((await store.get('nightly'))?.nextTick).toBeUndefined();
    expect(await store.due(T0 + 1_000_000, 100)).toEqual([]);
    expect(await store.setPaused('nightly', false, T0 + 50_000, T0 + 45_000)).toBe(true);
    expect(await store.get('nightly')).toMatchObject({ paused: false, since: T0 + 45_000, nextTick: T0 + 50_000, generation: 4 });
    expect(await store.nextTick()).toBe(T0 + 50_000);

    await store.delete('nightly');
    expect(await store.get('nightly')).toBeUndefined();
    expect(await store.list()).toEqual([]);
    expect(await store.nextTick()).toBeUndefined();
    for (const p of [store.delete('nightly'), store.setPaused('nightly', true, undefined, T0), store.setPaused('nope', false, T0, T0)]) {
      expect((await refusal(p)).code).toBe('UNKNOWN_SCHEDULE');
    }
    expect((await refusal(store.delete('nightly'))).message).toBe('no schedule "nightly": list them with triad schedules list');
  });
});

describe('fireSchedule', () => {
  it('fires a tick once: the submission waits in the outbox; the same tick or an earlier one again does nothing', async () => {
    const store = new ScheduleStore(r(), ns());
    await store.put(def(), T0 + 10_000, T0, false);
    const tick = T0 + 10_000;
    expect(await fire(store, { tick })).toEqual({ action: 'fired' });
    expect(await fire(store, { tick })).toEqual({ action: 'noop', reason: 'already fired' });
    expect(await fire(store, { tick: tick - 10_000 })).toEqual({ action: 'noop', reason: 'already fired' });
    const s = await store.get('nightly');
    expect(s).toMatchObject({ lastTick: tick, lastTaskId: `sch:nightly:${tick}`, fired: 1, nextTick: tick + 10_000 });
    expect(await store.due(tick + 9_999, 100)).toEqual([]);
    expect(await store.due(tick + 10_000, 100)).toEqual(['nightly']);

    const pending = await store.outbox(100);
    expect(pending.map((p) => ({ client: p.client, taskId: p.taskId }))).toEqual([{ client: 'web', taskId: `sch:nightly:${tick}` }]);
    expect(unpackTrusted(pending[0]!.bytes)).toEqual({ taskId: `sch:nightly:${tick}` });
    expect(await store.inOutbox('web', `sch:nightly:${tick}`)).toBe(true);
    await store.published(pending.map((p) => p.field));
    expect(await store.outbox(100)).toEqual([]);
    expect(await store.inOutbox('web', `sch:nightly:${tick}`)).toBe(false);
  });

  it('a stale epoch writes nothing; a newer one raises the fence', async () => {
    const n = ns();
    const store = new ScheduleStore(r(), n);
    await store.put(def(), T0 + 10_000, T0, false);
    expect((await fire(store, { tick: T0 + 10_000, epoch: 5 })).action).toBe('fired');
    expect(await r().get(keys(n).scheduleEpoch)).toBe('5');
    const stale = await refusal(fire(store, { tick: T0 + 20_000, epoch: 4 }));
    expect(stale.code).toBe('STALE');
    expect(stale.message).toMatch(/the slot has seen epoch 5/);
    expect(await store.get('nightly')).toMatchObject({ lastTick: T0 + 10_000, fired: 1 });
    expect(await store.outbox(100)).toHaveLength(1);
    expect((await fire(store, { tick: T0 + 20_000, epoch: 6 })).action).toBe('fired');
    expect(await r().get(keys(n).scheduleEpoch)).toBe('6');
  });

  it('does nothing for a fire computed before a change (generation), while paused, or after a delete', async () => {
    const store = new ScheduleStore(r(), ns());
    await store.put(def(), T0 + 10_000, T0, false);
    await store.put(def('nightly', { every: 20_000 }), T0 + 20_000, T0 + 1, true);
    expect(await fire(store, { tick: T0 + 10_000, generation: 1 })).toEqual({ action: 'noop', reason: 'changed' });
    await store.setPaused('nightly', true, undefined, T0 + 2);
    expect(await fire(store, { tick: T0 + 20_000, generation: 3 })).toEqual({ action: 'noop', reason: 'paused' });
    await store.delete('nightly');
    expect(await fire(store, { tick: T0 + 20_000, generation: 3 })).toEqual({ action: 'noop', reason: 'deleted' });
    expect(await store.outbox(100)).toEqual([]);
  });

  it('a skip records the tick and the skip, keeps the last task, and submits nothing; missed ticks are counted', async () => {
    const store = new ScheduleStore(r(), ns());
    await store.put(def(), T0 + 10_000, T0, false);
    await fire(store, { tick: T0 + 10_000 });
    await store.published((await store.outbox(100)).map((p) => p.field));
    expect(await fire(store, { tick: T0 + 20_000, skip: true })).toEqual({ action: 'skipped' });
    expect(await store.get('nightly')).toMatchObject({ lastTick: T0 + 20_000, lastTaskId: `sch:nightly:${T0 + 10_000}`, fired: 1, skipped: 1, missed: 0 });
    expect(await store.outbox(100)).toEqual([]);
    expect(await fire(store, { tick: T0 + 90_000, missed: 6 })).toEqual({ action: 'fired' });
    expect(await store.get('nightly')).toMatchObject({ lastTick: T0 + 90_000, fired: 2, skipped: 1, missed: 6 });
  });

  it('a cron pattern that never fires again leaves the due index', async () => {
    const store = new ScheduleStore(r(), ns());
    await store.put(def(), T0 + 10_000, T0, false);
    const t = scheduleTaskId('nightly', T0 + 10_000);
    expect((await store.fire({ name: 'nightly', generation: 1, tick: T0 + 10_000, taskId: t, submission: encode({}), nextTick: undefined, missed: 0, skip: false, now: T0 + 10_001, epoch: 1 })).action).toBe('fired');
    expect(await store.due(Number.MAX_SAFE_INTEGER, 100)).toEqual([]);
    expect((await store.get('nightly'))?.nextTick).toBeUndefined();
  });
});
