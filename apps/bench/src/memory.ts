/**
 * Redis memory per finished task: INFO used_memory before and after N tasks run through the real path,
 * cross-checked with MEMORY USAGE of the records; what a finished record holds, field by field; and
 * the size of the same record under the compaction rules docs/performance.md proposes (measured on a
 * scratch copy — the store itself is not changed here).
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

export interface MemoryResult {
  tasks: number;
  /** (used_memory after − before) / tasks. */
  usedMemoryPerTask: number;
  /** Mean MEMORY USAGE of the task hashes plus each task's share of the tasks and finished indexes. */
  keyBytesPerTask: number;
  hashBytes: number;
  indexBytesPerTask: number;
  encoding: string;
  fields: FieldSize[];
  /** MEMORY USAGE of one record rewritten under the proposed compaction rules. */
  compactedBytes: number;
  compactedEncoding: string;
  /** MEMORY USAGE of the unchanged record stored as a listpack (Redis config only), when measured. */
  listpackBytes?: number;
  listpackValueLimit?: number;
}

async function usedMemory(redis: Redis): Promise<number> {
  const info = await redis.info('memory');
  const m = /used_memory:(\d+)/.exec(info);
  if (!m?.[1]) throw new Error('INFO memory has no used_memory');
  return Number(m[1]);
}

/** Waits (bounded) until no task lease keys remain: releases are sent without waiting for them. */
async function leasesGone(redis: Redis, namespace: string): Promise<void> {
  const pattern = `${keys(namespace).prefix}:lease:*`;
  for (let i = 0; i < 60; i++) {
    const [, found] = await redis.scan('0', 'MATCH', pattern, 'COUNT', 100_000);
    if (found.length === 0) return;
    await sleep(100);
  }
}

function printable(v: Buffer): string {
  const s = v.toString('utf8');
  return /^[\x20-\x7e]*$/.test(s) ? s : `0x${v.toString('hex')}`;
}

/**
 * The record of a finished, completed task under the proposed rules: drop what only a running task needs
 * (plan — the pinned definition is in the workflow hash —, replyTo, lockedBy, lockEpoch, onFailure,
 * input), and shrink each step to `status|attempt|failures|startedAt|finishedAt`, so every value stays
 * under 64 bytes and Redis keeps the hash as a listpack.
 */
export function compactRecord(h: Record<string, Buffer>): Record<string, Buffer | string> {
  const drop = new Set(['plan', 'replyTo', 'lockedBy', 'lockEpoch', 'onFailure', 'input', 'updatedAt']);
  const out: Record<string, Buffer | string> = {};
  for (const [f, v] of Object.entries(h)) {
    if (drop.has(f)) continue;
    if (f.startsWith('s:')) {
      const r = JSON.parse(v.toString('utf8')) as { status?: string; attempt?: number; failureCount?: number; startedAt?: number; finishedAt?: number };
      out[f] = `${r.status?.[0] ?? '?'}|${r.attempt ?? 0}|${r.failureCount ?? 0}|${r.startedAt ?? ''}|${r.finishedAt ?? ''}`;
    } else out[f] = v;
  }
  return out;
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

export async function measureMemory(
  client: TriadClient,
  completions: Completions,
  redis: Redis,
  namespace: string,
  workflow: string,
  tasks: number,
  steps: number,
  ownRedis: boolean,
): Promise<MemoryResult> {
  const k = keys(namespace);
  await leasesGone(redis, namespace);
  const before = await usedMemory(redis);
  const batch = await runBatch(client, completions, workflow, tasks, steps);
  await leasesGone(redis, namespace);
  const after = await usedMemory(redis);

  const sample = batch.taskIds.slice(0, 200);
  const usage = await Promise.all(sample.map((id) => redis.memory('USAGE', k.task(id), 'SAMPLES', '0')));
  const hashBytes = usage.reduce<number>((a, b) => a + Number(b ?? 0), 0) / sample.length;
  // Each task is one member of the tasks index and one of the finished index.
  let indexBytesPerTask = 0;
  for (const z of [k.tasks, k.finished]) {
    const [bytes, card] = await Promise.all([redis.memory('USAGE', z, 'SAMPLES', '0'), redis.zcard(z)]);
    if (card > 0) indexBytesPerTask += Number(bytes ?? 0) / card;
  }
  const first = sample[0];
  if (!first) throw new Error('memory: no task ran');
  const h = await redis.hgetallBuffer(k.task(first));
  const encoding = String(await redis.object('ENCODING', k.task(first)));
  const fields = Object.entries(h)
    .map(([field, v]) => ({ field, bytes: v.length, sample: printable(v).slice(0, 160) }))
    .sort((a, b) => b.bytes - a.bytes);

  const scratch = `${k.prefix}:bench:compacted:{${first}}`;
  await redis.hset(scratch, compactRecord(h));
  const compactedBytes = Number((await redis.memory('USAGE', scratch, 'SAMPLES', '0')) ?? 0);
  const compactedEncoding = String(await redis.object('ENCODING', scratch));
  await redis.del(scratch);

  const listpack = ownRedis ? await asListpack(redis, `${k.prefix}:bench:listpack:{${first}}`, h) : undefined;
  if (listpack && listpack.encoding !== 'listpack') throw new Error(`memory: the listpack copy is stored as ${listpack.encoding}`);

  return {
    ...(listpack ? { listpackBytes: listpack.bytes, listpackValueLimit: listpack.limit } : {}),
    tasks,
    usedMemoryPerTask: (after - before) / tasks,
    keyBytesPerTask: hashBytes + indexBytesPerTask,
    hashBytes,
    indexBytesPerTask,
    encoding,
    fields,
    compactedBytes,
    compactedEncoding,
  };
}
