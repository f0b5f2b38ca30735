/**
 * The supervisors' fence on every bucket (decision 0015): each bucket keeps the highest leader epoch it
 * has seen, and a new leader raises them all to its epoch before it acts.
 */
import type { RedisClient } from './client.js';
import { ScriptCode, scriptError } from './codes.js';
import type { Keys } from './keys.js';
import { runScript } from './scripts.js';

/**
 * Raises every bucket's fence to `epoch`. Returns the highest epoch a bucket had already seen above
 * `epoch` (that bucket is left as it was), or 0 when every bucket is now fenced at `epoch`.
 */
export async function raiseFences(redis: RedisClient, k: Keys, epoch: number): Promise<number> {
  const replies = await Promise.all(k.buckets.map(async (b) => (await runScript(redis, 'fenceBucket', [b.epoch], [epoch])) as unknown[]));
  let newer = 0;
  for (const reply of replies) {
    const code = Number(reply[0]);
    if (code === ScriptCode.StaleEpoch) newer = Math.max(newer, Number(reply[1]));
    else if (code !== ScriptCode.Ok) throw scriptError(code, `fence the buckets at epoch ${epoch}`);
  }
  return newer;
}

/** raiseFences that throws TriadError STALE when a bucket has seen a newer epoch. */
export async function fenceBuckets(redis: RedisClient, k: Keys, epoch: number): Promise<void> {
  const newer = await raiseFences(redis, k, epoch);
  if (newer > 0) throw scriptError(ScriptCode.StaleEpoch, `fence the buckets at epoch ${epoch}`, `a bucket has seen epoch ${newer}`);
}
