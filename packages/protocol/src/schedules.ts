/**
 * Schedules (decision 0019 §6): the `schedule.*` API's requests and the schedule record it answers with.
 * Operator only. The timing (`every`, `cron`, `timezone`) is checked by the scheduler with
 * `@triad/core`'s schedule module (the one place that names the cron library); here only its shape.
 */
import { z } from 'zod';
import { ClientIdSchema, NameSchema } from './names.js';
import { optional, tolerant } from './messages.js';

const epochMs = z.number().int().nonnegative();

export const ScheduleOverlapSchema = z.enum(['skip', 'allow']);
export type ScheduleOverlap = z.output<typeof ScheduleOverlapSchema>;

/**
 * `schedule.create`: exactly one of `every` (ms, or a duration such as `10s`, `5m`; 1 s to 30 days) and
 * `cron` (5 fields, 6 with seconds, in `timezone`, default UTC). The tasks are submitted as `client`'s
 * (the SDK sends its own client id when none is named); `replace` changes an existing schedule.
 */
export const CreateScheduleRequestSchema = z.object({
  name: NameSchema,
  workflow: NameSchema,
  version: optional(z.number().int().min(1)),
  every: optional(z.union([z.number().int(), z.string().min(1).max(40)])),
  cron: optional(z.string().min(1).max(200)),
  timezone: optional(z.string().min(1).max(100)),
  input: optional(z.unknown()),
  overlap: ScheduleOverlapSchema.default('skip'),
  client: optional(ClientIdSchema),
  replace: z.boolean().default(false),
});
export type CreateScheduleRequest = z.input<typeof CreateScheduleRequestSchema>;

/** `schedule.get`, `.pause`, `.resume`, `.delete`: the schedule's name. */
export const ScheduleNameRequestSchema = z.object({ name: NameSchema });

/** A schedule as stored, with what its firing recorded. */
export const ScheduleSchema = z.object({
  name: z.string(),
  workflow: z.string(),
  /** The pinned version; the latest registered at each tick when absent. */
  version: optional(z.number().int().min(1)),
  /** The client the tasks are submitted as (they are that client's to read). */
  client: z.string(),
  /** Interval in ms (exclusive with cron). */
  every: optional(z.number().int().positive()),
  cron: optional(z.string()),
  /** The cron pattern's IANA time zone (UTC when absent). */
  timezone: optional(z.string()),
  overlap: tolerant(ScheduleOverlapSchema),
  paused: z.boolean(),
  input: optional(z.unknown()),
  createdAt: epochMs,
  updatedAt: epochMs,
  /** Bumped by every change (replace, pause, resume): a fire computed before it does nothing. */
  generation: z.number().int().min(1),
  /** The next tick (absent while paused, or when a cron pattern never fires again). */
  nextTick: optional(epochMs),
  /** The last tick fired or skipped, and the task the last fired one submitted (`sch:<name>:<tick>`). */
  lastTick: optional(epochMs),
  lastTaskId: optional(z.string()),
  fired: z.number().int().nonnegative(),
  /** Ticks not fired because the previous task still ran (overlap skip). */
  skipped: z.number().int().nonnegative(),
  /** Ticks older than the catch-up window after an outage: only the latest of them fired. */
  missed: z.number().int().nonnegative(),
});
export type Schedule = z.output<typeof ScheduleSchema>;

export const CreateScheduleReplySchema = ScheduleSchema.extend({ created: z.boolean() });
export const DeleteScheduleReplySchema = z.object({ name: z.string(), deleted: z.boolean() });

/** The task id of a schedule's tick: the same on every supervisor, so a tick is one task however often it is fired. */
export function scheduleTaskId(name: string, tick: number): string {
  return `sch:${name}:${tick}`;
}
