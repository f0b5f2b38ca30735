/**
 * Fast, faithful seeding of finished tasks for the scan measurement: one real finished task's record is
 * replicated inside Redis by a Lua loop (no network per task), each copy with its own id, in both
 * indexes of its bucket (`tasks` by createdAt, `finished` by finishedAt, decision 0015) and — like a real
 * finished task — with no deadline entry. The ids of a chunk are grouped by bucket (computed by the
 * store's key builder), one script per bucket and chunk, so each script touches one slot.
 */
import type { Redis } from 'ioredis';
import { keys, type BucketKeys } from '@triad/store';

const REPLICATE = `
local prefix, tasksKey, finishedKey = ARGV[1], ARGV[2], ARGV[3]
local base, n = tonumber(ARGV[4]), tonumber(ARGV[5])
local fields, idAt = {}, nil
for i = 6 + 2 * n, #ARGV, 2 do
  fields[#fields + 1] = ARGV[i]
  fields[#fields + 1] = ARGV[i + 1]
  if ARGV[i] == 'id' then idAt = #fields end
end
local zt, zf = {}, {}
local function flush()
  if #zt > 0 then
    redis.call('ZADD', tasksKey, unpack(zt))
    redis.call('ZADD', finishedKey, unpack(zf))
    zt, zf = {}, {}
  end
end
for j = 0, n - 1 do
  local id, num = ARGV[6 + 2 * j], tonumber(ARGV[7 + 2 * j])
  if idAt then fields[idAt] = id end
  redis.call('HSET', prefix .. id, unpack(fields))
  zt[#zt + 1] = base + num
  zt[#zt + 1] = id
  zf[#zf + 1] = base + num + 40
  zf[#zf + 1] = id
  if #zt >= 1000 then flush() end
end
flush()
return n
`;

export interface SeedTarget {
  namespace: string;
  /** 24 characters: with a 12-digit counter the ids are as long as the UUIDs Triad's client makes. */
  idPrefix: string;
}

const CHUNK = 20_000;

/** Ids `from`..`to - 1` grouped by their bucket. */
function byBucket(t: SeedTarget, from: number, to: number): Map<BucketKeys, [string, number][]> {
  const k = keys(t.namespace);
  const groups = new Map<BucketKeys, [string, number][]>();
  for (let n = from; n < to; n++) {
    const id = replicaId(t, n);
    const b = k.forTask(id);
    const g = groups.get(b);
    if (g) g.push([id, n]);
    else groups.set(b, [[id, n]]);
  }
  return groups;
}

/** Replicates `template` (a task hash) as tasks number `from`..`to - 1`; returns how many were written. */
export async function replicateFinished(redis: Redis, t: SeedTarget, template: Record<string, Buffer>, from: number, to: number): Promise<number> {
  const pairs: (string | Buffer)[] = [];
  for (const [f, v] of Object.entries(template)) pairs.push(f, v);
  // Finished within the last hours: inside the default 24 h retention, so no purge would take them yet.
  const base = Date.now() - 2 * 3_600_000;
  let written = 0;
  for (let a = from; a < to; a += CHUNK) {
    for (const [b, ids] of byBucket(t, a, Math.min(to, a + CHUNK))) {
      const flat = ids.flatMap(([id, n]) => [id, n]);
      written += Number(await redis.eval(REPLICATE, 0, b.taskPrefix, b.tasks, b.finished, base, ids.length, ...flat, ...pairs));
    }
  }
  return written;
}

/** Removes replicas `from`..`to - 1` and the buckets' two indexes (used when the Redis is not the run's own). */
export async function removeReplicas(redis: Redis, t: SeedTarget, from: number, to: number): Promise<void> {
  const k = keys(t.namespace);
  for (let a = from; a < to; a += 1_000) {
    const ids = Array.from({ length: Math.min(to, a + 1_000) - a }, (_, i) => k.task(replicaId(t, a + i)));
    await redis.unlink(...ids);
  }
  for (const b of k.buckets) await redis.unlink(b.tasks, b.finished);
}

export function replicaId(t: SeedTarget, n: number): string {
  return `${t.idPrefix}${String(n).padStart(12, '0')}`;
}
