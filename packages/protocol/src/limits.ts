/**
 * Dispatch limits per agent type (decision 0020 §1.1, §1.8): the `agentLimit.*` API's bodies (operator
 * only). A limit belongs to an agent type: at most `concurrency` attempts at once, `ratePerSecond` with
 * `burst`, and per value of `key` (a path into the task input) the per-key limits. Every problem of a
 * request is listed at once, each saying what to do.
 */
import { z } from 'zod';
import { NameSchema } from './names.js';
import { optional } from './messages.js';
import { agentLimitProblems } from './constants.js';

export { agentLimitProblems, parseRate, formatRate } from './constants.js';

const count = (flag: string) =>
  z.number({ error: `${flag}: expected a whole number from 1 to 100000` }).int(`${flag}: expected a whole number from 1 to 100000`).min(1, `${flag}: expected a whole number from 1 to 100000`).max(100_000, `${flag}: expected a whole number from 1 to 100000`);
const rate = (flag: string) =>
  z
    .number({ error: `${flag}: expected a rate per second` })
    .min(1 / 3600, `${flag} is too slow: at least 1/h`)
    .max(100_000, `${flag} is above 100000/s`);

/** `input.<path>`: 1–8 segments after `input.` (decision 0019's PathSchema). */
export const LimitKeySchema = z
  .string()
  .regex(/^input(\.[^.\s]{1,64}){1,8}$/, '--key must be input.<path> (e.g. input.customerId or input.customer.id): the key is read from each task\'s input');

const AgentLimitFields = z
  .object({
    agent: NameSchema,
    concurrency: optional(count('--concurrency')),
    ratePerSecond: optional(rate('--rate')),
    burst: optional(count('--burst')),
    key: optional(LimitKeySchema),
    perKeyConcurrency: optional(count('--per-key-concurrency')),
    perKeyRatePerSecond: optional(rate('--per-key-rate')),
    perKeyBurst: optional(count('--per-key-burst')),
    pausePerKey: optional(z.boolean()),
  })
  .strict();

/** `agentLimit.set`: replaces the agent type's whole limit. */
export const AgentLimitSchema = AgentLimitFields.superRefine((l, ctx) => {
  for (const p of agentLimitProblems(l)) ctx.addIssue({ code: 'custom', path: [p.path], message: p.message });
});
export type AgentLimit = z.output<typeof AgentLimitSchema>;

/** A stored limit: as set, with when. */
export const StoredAgentLimitSchema = AgentLimitFields.extend({ setAt: z.number().int().nonnegative() });
export type StoredAgentLimit = z.output<typeof StoredAgentLimitSchema>;

export const AgentLimitSetReplySchema = z.object({ limit: StoredAgentLimitSchema, previous: optional(StoredAgentLimitSchema), warnings: z.array(z.string()) });
export type AgentLimitSetReply = z.output<typeof AgentLimitSetReplySchema>;

export const AgentLimitListRequestSchema = z.object({ agent: optional(NameSchema), keys: optional(z.number().int().min(0).max(100)) }).strict();
export type AgentLimitListRequest = z.output<typeof AgentLimitListRequestSchema>;

export const AgentLimitKeyStatusSchema = z.object({
  key: z.string(),
  inFlight: z.number().int().nonnegative(),
  waiting: z.number().int().nonnegative(),
  oldestWaitMs: optional(z.number().nonnegative()),
  pausedUntil: optional(z.number()),
  /** When the key may be served again: a time, or `concurrency` (when one of its permits ends). */
  blockedUntil: optional(z.union([z.number(), z.literal('concurrency')])),
});

/** One agent type's limiter now (decision 0020 §1.8, §6). */
export const AgentLimitStatusSchema = z.object({
  agent: NameSchema,
  /** Absent for a pause-only or draining limiter. */
  limit: optional(StoredAgentLimitSchema),
  inFlight: z.number().int().nonnegative(),
  waiting: z.number().int().nonnegative(),
  oldestWaitMs: optional(z.number().nonnegative()),
  /** Grants in the last 10 s / 10. */
  ratePerSecondNow: z.number().nonnegative(),
  pausedUntil: optional(z.number()),
  draining: optional(z.boolean()),
  keys: optional(z.array(AgentLimitKeyStatusSchema)),
});
export type AgentLimitStatus = z.output<typeof AgentLimitStatusSchema>;

export const AgentLimitClearRequestSchema = z.object({ agent: NameSchema }).strict();
export const AgentLimitClearReplySchema = z.object({ agent: NameSchema, cleared: z.boolean(), waiting: z.number().int().nonnegative() });
export type AgentLimitClearReply = z.output<typeof AgentLimitClearReplySchema>;

