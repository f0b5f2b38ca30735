/**
 * Redis memory per finished task, before and after retention compacts it (decision 0007): INFO
 * used_memory before and after N tasks run through the real path, cross-checked with MEMORY USAGE of the
 * records; what a finished record holds, field by field, in both forms. The compaction is the real one:
 * the run's supervisor with TRIAD_COMPACT_AFTER_MS=0 compacts the records, and they are measured once
 * the compaction index is empty.
 */
import type { Redis } from 'ioredis';
import type { TriadClient } from '@triad/client';
import { keys } from '@triad/store';
import { runBatch } from './batch.js';
import type { Completions } from './completions.js';
import { sleep } from './timing.js';

export interface FieldSize {
  field: string;
  bytes: number;
  sample: string;
}

/** One form of the finished records (full, or compacted). */
export interface MemoryFigures {
  /** (used_memory after − before) / tasks. */
  usedMemoryPerTask: number;
  /** Mean MEMORY USAGE of the task hashes plus each task's share of the indexes that hold it. */
  keyBytesPerTask: number;
  hashBytes: number;
  indexBytesPerTask: number;
  encoding: string;
  fields: FieldSize[];
}

export interface MemoryResult {
  tasks: number;
  /** As a task finishes (and for TRIAD_COMPACT_AFTER_MS after), in the tasks, finished and compact indexes. */
  uncompacted: MemoryFigures;
  /** After retention compacted the records (the rest of the retention time), in the tasks and finished indexes. */
  compacted: MemoryFigures;
  /** From asking for a compacting supervisor (its process start included) until the compaction index was empty, ms. */
  compactionMs: number;
  /** MEMORY USAGE of the uncompacted record stored as a listpack (Redis config only), when measured. */
  listpackBytes?: number;
  listpackValueLimit?: number;
}

/** The run's supervisor, which this measurement restarts with the compaction delay it needs. */
export interface SupervisorControl {
  /** Replaces the running supervisor with one started with TRIAD_COMPACT_AFTER_MS=`ms` (no-op if it already is). */
  compactAfter(ms: number): Promise<void>;
}

/** A compaction delay longer than any run: the records of the batch stay full until they are measured. */
const NEVER_DURING_RUN_MS = 86_400_000;

async function usedMemory(redis: Redis): Promise<number> {
  const info = await redis.info('memory');
  const m = /used_memory:(\d+)/.exec(info);
  if (!m?.[1]) throw new Error('INFO memory has no used_memory');
  return Number(m[1]);
}

/** Waits (bounded) until no task lease keys remain: releases are sent without waiting for them. */
async function leasesGone(redis: Redis, namespace: string): Promise<void> {
  const pattern = `${keys(namespace).prefix}:*:lease:*`;
  for (let i = 0; i < 60; i++) {
    const [, found] = await redis.scan('0', 'MATCH', pattern, 'COUNT', 100_000);
    if (found.length === 0) return;
    await sleep(100);
  }
}

/** Finished tasks waiting in the buckets' compaction indexes. */
async function compactionWaiting(redis: Redis, namespace: string): Promise<number> {
  const counts = await Promise.all(keys(namespace).buckets.map((b) => redis.zcard(b.compact)));
  return counts.reduce((a, b) => a + b, 0);
}

/** Waits until the compaction index is empty (every completed task compacted). */
async function compactionDone(redis: Redis, namespace: string, timeoutMs: number): Promise<void> {
  const t0 = Date.now();
  for (;;) {
    const left = await compactionWaiting(redis, namespace);
    if (left === 0) return;
    if (Date.now() - t0 > timeoutMs) {
      throw new Error(`memory: ${left} finished tasks still wait in the compaction indexes after ${timeoutMs} ms; is the supervisor running with TRIAD_COMPACT_AFTER_MS=0 and leading?`);
    }
    await sleep(50);
  }
}

function printable(v: Buffer): string {
  const s = v.toString('utf8');
  return /^[\x20-\x7e]*$/.test(s) ? s : `0x${v.toString('hex')}`;
}

/** MEMORY USAGE of a sample of the records, their indexes' share, and the first record field by field. */
async function figures(redis: Redis, namespace: string, taskIds: readonly string[], usedMemoryPerTask: number): Promise<MemoryFigures> {
  const k = keys(namespace);
  const sample = taskIds.slice(0, 200);
  const usage = await Promise.all(sample.map((id) => redis.memory('USAGE', k.task(id), 'SAMPLES', '0')));
  const hashBytes = usage.reduce<number>((a, b) => a + Number(b ?? 0), 0) / sample.length;
  // A task is one member of each index that holds it (the compaction index only until it is compacted).
  let indexBytesPerTask = 0;
  // Each index is one zset per bucket (decision 0015): bytes over members, summed over the buckets.
  for (const which of ['tasks', 'finished', 'compact'] as const) {
    let bytes = 0;
    let card = 0;
    for (const b of k.buckets) {
      const [u, c] = await Promise.all([redis.memory('USAGE', b[which], 'SAMPLES', '0'), redis.zcard(b[which])]);
      if (c > 0) {
        bytes += Number(u ?? 0);
        card += c;
      }
    }
    if (card > 0) indexBytesPerTask += bytes / card;
  }
  const first = sample[0];
  if (!first) throw new Error('memory: no task ran');
  const h = await redis.hgetallBuffer(k.task(first));
  const fields = Object.entries(h)
    .map(([field, v]) => ({ field, bytes: v.length, sample: printable(v).slice(0, 160) }))
    .sort((a, b) => b.bytes - a.bytes);
  return { usedMemoryPerTask, keyBytesPerTask: hashBytes + indexBytesPerTask, hashBytes, indexBytesPerTask, encoding: String(await redis.object('ENCODING', k.task(first))), fields };
}

/**
 * The unchanged record written while `hash-max-listpack-value` is raised so Redis keeps it as a listpack
 * (a configuration change, no code change). Only on the run's own Redis: the setting is server-wide.
 */
async function asListpack(redis: Redis, key: string, h: Record<string, Buffer>): Promise<{ bytes: number; limit: number; encoding: string }> {
  const limit = Math.max(...Object.values(h).map((v) => v.length)) <= 256 ? 256 : 1024;
  const previous = (await redis.config('GET', 'hash-max-listpack-value')) as string[];
  await redis.config('SET', 'hash-max-listpack-value', String(limit));
  try {
    await redis.hset(key, h);
    const bytes = Number((await redis.memory('USAGE', key, 'SAMPLES', '0')) ?? 0);
    return { bytes, limit, encoding: String(await redis.object('ENCODING', key)) };
  } finally {
    await redis.del(key);
    await redis.config('SET', 'hash-max-listpack-value', previous[1] ?? '64');
  }
}

/**
 * 1. A supervisor with TRIAD_COMPACT_AFTER_MS=0 compacts what earlier measurements left, so that nothing
 *    but this batch changes size in between; then one that does not compact during the run takes over.
 * 2. The batch runs; its finished records are measured as they are.
 * 3. A supervisor with TRIAD_COMPACT_AFTER_MS=0 (left running for the rest of the run) compacts them; once
 *    the compaction index is empty they are measured again against the same starting point.
 */
export async function measureMemory(
  client: TriadClient,
  completions: Completions,
  redis: Redis,
  namespace: string,
  workflow: string,
  tasks: number,
  steps: number,
  ownRedis: boolean,
  supervisor: SupervisorControl,
): Promise<MemoryResult> {
  const k = keys(namespace);
  await supervisor.compactAfter(0);
  await compactionDone(redis, namespace, 120_000);
  await supervisor.compactAfter(NEVER_DURING_RUN_MS);

  await leasesGone(redis, namespace);
  const before = await usedMemory(redis);
  const batch = await runBatch(client, completions, workflow, tasks, steps);
  await leasesGone(redis, namespace);
  const afterRun = await usedMemory(redis);
  const waiting = await compactionWaiting(redis, namespace);
  if (waiting !== tasks) throw new Error(`memory: expected the ${tasks} completed tasks in the compaction indexes, found ${waiting}`);
  const uncompacted = await figures(redis, namespace, batch.taskIds, (afterRun - before) / tasks);
  const first = batch.taskIds[0] ?? '';
  const full = await redis.hgetallBuffer(k.task(first));

  const t0 = Date.now();
  await supervisor.compactAfter(0);
  await compactionDone(redis, namespace, 120_000);
  const compactionMs = Date.now() - t0;
  await leasesGone(redis, namespace);
  const afterCompaction = await usedMemory(redis);
  const compacted = await figures(redis, namespace, batch.taskIds, (afterCompaction - before) / tasks);
  if (!compacted.fields.some((f) => f.field === 'c')) throw new Error(`memory: task ${first} is not marked compacted after the compaction index emptied`);

  const listpack = ownRedis ? await asListpack(redis, `${k.prefix}:bench:listpack:{${first}}`, full) : undefined;
  if (listpack && listpack.encoding !== 'listpack') throw new Error(`memory: the listpack copy is stored as ${listpack.encoding}`);

  return {
    ...(listpack ? { listpackBytes: listpack.bytes, listpackValueLimit: listpack.limit } : {}),
    tasks,
    uncompacted,
    compacted,
    compactionMs,
  };
}
