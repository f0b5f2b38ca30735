/**
 * The supervisor's settings: one zod schema whose input is what callers pass (every field optional) and
 * whose output is what the supervisor uses, every default applied here and nowhere else. The service
 * (apps/supervisor) reads the same schema from TRIAD_* variables.
 */
import { z } from 'zod';
import { DEFAULT_SUPERVISION } from '@triad/core';
import { ErrorCode, TriadError } from '@triad/protocol';
import { MIN_LEASE_MS } from '@triad/store';

const ms = (min: number) => z.number().int().min(min);

export const SupervisorSettingsSchema = z.object({
  /** How often the leader sweeps at the latest (TRIAD_SUPERVISOR_INTERVAL_MS). */
  intervalMs: ms(10).default(DEFAULT_SUPERVISION.sweepIntervalMs),
  /** The leadership lease; a new leader takes over within about this after the old one dies (TRIAD_SUPERVISOR_LEASE_MS). */
  leaseMs: ms(MIN_LEASE_MS).default(DEFAULT_SUPERVISION.leaderLeaseMs),
  /** Expired steps handled per sweep (the rest wait for the next one). */
  batchSize: z.number().int().min(1).default(500),
  /** Finished tasks are removed this long after they finished (TRIAD_RETENTION_MS; 24 h). */
  retentionMs: ms(0).default(86_400_000),
  /**
   * Finished tasks that can never be retried (completed, compensated, cancelled) keep their full record
   * this long, for operators to inspect, then the leader compacts it (TRIAD_COMPACT_AFTER_MS; 10 min;
   * 0 = on the next sweep). Decision 0007.
   */
  compactAfterMs: ms(0).default(600_000),
  /**
   * The object GC (decision 0021 §4.6) looks at an object only once it is this old (TRIAD_OBJECT_GC_GRACE_MS;
   * 15 min): an upload whose submission or result is still on its way is never taken for an orphan.
   */
  objectGcGraceMs: ms(0).default(900_000),
  /** Replicas that must hold an election before the winner leads (TRIAD_REDIS_WAIT_REPLICAS, decision 0015). */
  waitReplicas: z.number().int().min(0).max(16).default(0),
});

/** What a caller may set. */
export type SupervisorSettings = z.input<typeof SupervisorSettingsSchema>;
/** What the supervisor uses: every field set. */
export type ResolvedSupervisorSettings = z.output<typeof SupervisorSettingsSchema>;

/** The defaults, for messages and docs. */
export const SUPERVISOR_DEFAULTS: ResolvedSupervisorSettings = SupervisorSettingsSchema.parse({});

/**
 * The settings with their defaults; a TriadError INVALID_CONFIG names every setting that is wrong, each
 * problem worded by `explain` (the service names the variable and what to set).
 */
export function resolveSupervisorSettings(input: SupervisorSettings, explain: (field: string, problem: string) => string = (f, p) => `${f}: ${p}`): ResolvedSupervisorSettings {
  const parsed = SupervisorSettingsSchema.safeParse(input);
  if (parsed.success) return parsed.data;
  const details = parsed.error.issues.map((i) => explain(String(i.path[0]), i.message));
  throw new TriadError(ErrorCode.InvalidConfig, `invalid supervisor settings: ${details.join('; ')}`, { details });
}
