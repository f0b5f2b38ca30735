/**
 * Per-client submission rate limits (decision 0022): the limits an operator sets, stored in one hash, and
 * each limited client's allowance, taken by `takeIntakeSlot.lua` as a scheduler takes a submission. A
 * scheduler keeps the limits in memory for a moment, so an unlimited client costs no round trip.
 */
import { ClientLimitSchema, errorMessage, type ClientLimit } from '@triad/protocol';
import { type Logger } from '@triad/telemetry';
import type { RedisClient } from './client.js';
import { keys, type Keys } from './keys.js';
import { runScript } from './scripts.js';

/** The limit of `*`: every client without a limit of its own. */
export const EVERY_OTHER_CLIENT = '*';

/** How long a scheduler uses the limits it read: a change made through another scheduler applies within this. */
export const LIMITS_REFRESH_MS = 2_000;

export class IntakeStore {
  readonly keys: Keys;
  private cached: { at: number; limits: Map<string, ClientLimit> } | undefined;
  private reading: Promise<Map<string, ClientLimit>> | undefined;
  /** Bumped by every change made here: a read begun before one is not cached after it. */
  private generation = 0;

  constructor(
    readonly redis: RedisClient,
    namespace: string,
    private readonly log?: Logger,
  ) {
    this.keys = keys(namespace);
  }

  /** Every stored limit, `*` first then by client id. Entries that do not parse are skipped (and logged). */
  async limits(): Promise<ClientLimit[]> {
    const raw = await this.redis.hgetall(this.keys.intakeLimits);
    const out: ClientLimit[] = [];
    for (const [client, json] of Object.entries(raw)) {
      let parsed: unknown;
      try {
        parsed = JSON.parse(json);
      } catch (e) {
        this.log?.warn({ client, err: errorMessage(e) }, 'unreadable submission limit ignored');
        continue;
      }
      const l = ClientLimitSchema.safeParse({ ...(parsed as object), client });
      if (l.success) out.push(l.data);
      else this.log?.warn({ client, err: l.error.message }, 'invalid submission limit ignored');
    }
    return out.sort((a, b) => (a.client === EVERY_OTHER_CLIENT ? -1 : b.client === EVERY_OTHER_CLIENT ? 1 : a.client.localeCompare(b.client)));
  }

  async setLimit(l: ClientLimit): Promise<void> {
    await this.redis.hset(this.keys.intakeLimits, l.client, JSON.stringify({ ratePerSecond: l.ratePerSecond, burst: l.burst, setAt: l.setAt }));
    this.forget();
  }

  /** Removes a client's limit; false when it had none. */
  async clearLimit(client: string): Promise<boolean> {
    const removed = await this.redis.hdel(this.keys.intakeLimits, client);
    this.forget();
    return removed > 0;
  }

  private forget(): void {
    this.generation++;
    this.cached = undefined;
    this.reading = undefined;
  }

  /** The limit that applies to `client` (its own, else `*`'s), from limits read at most LIMITS_REFRESH_MS ago. */
  async limitFor(client: string, now: number): Promise<ClientLimit | undefined> {
    let limits = this.cached && now - this.cached.at < LIMITS_REFRESH_MS ? this.cached.limits : undefined;
    if (!limits) {
      // One read at a time; concurrent submissions share it.
      const generation = this.generation;
      const reading = (this.reading ??= this.limits().then((ls) => new Map(ls.map((l) => [l.client, l]))));
      try {
        limits = await reading;
      } finally {
        if (this.reading === reading) this.reading = undefined;
      }
      if (generation === this.generation) this.cached = { at: now, limits };
    }
    return limits.get(client) ?? limits.get(EVERY_OTHER_CLIENT);
  }

  /**
   * Takes one submission of `client` (task `taskId`) under `limit`: 0 when it may be taken now, else how
   * many ms until its reserved slot.
   */
  async take(client: string, taskId: string, limit: ClientLimit, now: number): Promise<number> {
    const interval = 1_000 / limit.ratePerSecond;
    const reply = await runScript(this.redis, 'takeIntakeSlot', [this.keys.intakeState(client)], [taskId, now, interval.toFixed(3), (interval * (limit.burst - 1)).toFixed(3)]);
    return Number(reply);
  }
}
