/**
 * Fast, faithful seeding of finished tasks for the scan measurement: one real finished task's record is
 * replicated inside Redis by a Lua loop (no network per task), each copy with its own id, in both
 * indexes (`tasks` by createdAt, `finished` by finishedAt) and — like a real finished task — with no
 * deadline entry. Chunks keep each script short so Redis never blocks for long.
 *
 * The script touches keys it does not declare in KEYS: fine on a single Redis (the benchmark's), not
 * on a cluster, which is why this lives in the benchmark and not in the store.
 */
import type { Redis } from 'ioredis';

const REPLICATE = `
local prefix, idPrefix = ARGV[1], ARGV[2]
local first, last, base = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local tasksKey, finishedKey = ARGV[6], ARGV[7]
local fields, idAt = {}, nil
for i = 8, #ARGV, 2 do
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
for n = first, last do
  local id = idPrefix .. string.format('%012d', n)
  if idAt then fields[idAt] = id end
  redis.call('HSET', prefix .. id .. '}', unpack(fields))
  zt[#zt + 1] = base + n
  zt[#zt + 1] = id
  zf[#zf + 1] = base + n + 40
  zf[#zf + 1] = id
  if #zt >= 1000 then flush() end
end
flush()
return last - first + 1
`;

const UNLINK = `
local prefix, idPrefix = ARGV[1], ARGV[2]
local first, last = tonumber(ARGV[3]), tonumber(ARGV[4])
local batch = {}
for n = first, last do
  batch[#batch + 1] = prefix .. idPrefix .. string.format('%012d', n) .. '}'
  if #batch >= 1000 then redis.call('UNLINK', unpack(batch)) batch = {} end
end
if #batch > 0 then redis.call('UNLINK', unpack(batch)) end
return last - first + 1
`;

export interface SeedTarget {
  /** Task key up to the id: `triad:<ns>:task:{`. */
  taskKeyPrefix: string;
  tasksKey: string;
  finishedKey: string;
  /** 24 characters: with a 12-digit counter the ids are as long as the UUIDs Triad's client makes. */
  idPrefix: string;
}

const CHUNK = 20_000;

/** Replicates `template` (a task hash) as tasks number `from`..`to - 1`; returns how many were written. */
export async function replicateFinished(redis: Redis, t: SeedTarget, template: Record<string, Buffer>, from: number, to: number): Promise<number> {
  const pairs: (string | Buffer)[] = [];
  for (const [f, v] of Object.entries(template)) pairs.push(f, v);
  // Finished within the last hours: inside the default 24 h retention, so no purge would take them yet.
  const base = Date.now() - 2 * 3_600_000;
  let written = 0;
  for (let a = from; a < to; a += CHUNK) {
    const b = Math.min(to, a + CHUNK) - 1;
    written += Number(await redis.eval(REPLICATE, 0, t.taskKeyPrefix, t.idPrefix, a, b, base, t.tasksKey, t.finishedKey, ...pairs));
  }
  return written;
}

/** Removes replicas `from`..`to - 1` and the two indexes (used when the Redis is not the run's own). */
export async function removeReplicas(redis: Redis, t: SeedTarget, from: number, to: number): Promise<void> {
  for (let a = from; a < to; a += CHUNK * 5) {
    await redis.eval(UNLINK, 0, t.taskKeyPrefix, t.idPrefix, a, Math.min(to, a + CHUNK * 5) - 1);
  }
  await redis.unlink(t.tasksKey, t.finishedKey);
}

export function replicaId(t: SeedTarget, n: number): string {
  return `${t.idPrefix}${String(n).padStart(12, '0')}`;
}
