/**
 * The scheduler's settings: one zod schema whose input is what callers pass and whose output is what the
 * scheduler uses, every default applied here and nowhere else.
 */
import { z } from 'zod';
import { DEFAULT_MAX_OBJECT_BYTES, ErrorCode, MAX_REQUESTS_PER_BATCH, TriadError } from '@triad/protocol';

export const SchedulerSettingsSchema = z.object({
  /** Messages handled at once per consumer (submissions, results, commands). */
  concurrency: z.number().int().min(1).max(10_000).default(64),
  /**
   * How long a message a scheduler took may stay unacknowledged before another gets it. Handlers take
   * milliseconds: a short wait means messages a crashed scheduler had pulled come back quickly to another
   * one (a slow handler's message is merely redelivered, and applied once).
   */
  ackWaitMs: z.number().int().min(100).default(5_000),
  /** The largest object the payload broker stores or serves (TRIAD_MAX_OBJECT_BYTES; decision 0021 §4.1). */
  maxObjectBytes: z.number().int().min(1024).default(DEFAULT_MAX_OBJECT_BYTES),
  /**
   * The most step requests one message carries to an agent type that takes batches (decision 0023);
   * 1 sends every request alone (TRIAD_STEP_BATCHES=off).
   */
  stepBatchMax: z.number().int().min(1).max(MAX_REQUESTS_PER_BATCH).default(MAX_REQUESTS_PER_BATCH),
  /**
   * Whether the events of one event-loop turn's transitions go as one message to a reply subject that
   * reads batches (decision 0025); false (the default: not shown to pay, performance.md round 6) sends
   * one message per transition (TRIAD_EVENT_BATCHES=on|off).
   */
  eventBatches: z.boolean().default(false),
});

export type SchedulerSettings = z.input<typeof SchedulerSettingsSchema>;
export type ResolvedSchedulerSettings = z.output<typeof SchedulerSettingsSchema>;

/** The settings with their defaults; a TriadError INVALID_CONFIG names every setting that is wrong. */
export function resolveSchedulerSettings(input: SchedulerSettings): ResolvedSchedulerSettings {
  const parsed = SchedulerSettingsSchema.safeParse(input);
  if (parsed.success) return parsed.data;
  const details = parsed.error.issues.map((i) => `${String(i.path[0])}: ${i.message}`);
  throw new TriadError(ErrorCode.InvalidConfig, `invalid scheduler settings: ${details.join('; ')}`, { details });
}
