/**
 * Dispatch limits per agent type (decision 0020 §1.1, §1.8): the `agentLimit.*` API's bodies (operator
 * only). A limit belongs to an agent type: at most `concurrency` attempts at once, `ratePerSecond` with
 * `burst`, and per value of `key` (a path into the task input) the per-key limits. Every problem of a
 * request is listed at once, each saying what to do.
 */
import { z } from 'zod';
import { NameSchema } from './names.js';
import { optional } from './messages.js';

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

/** What makes a limit whole (§1.8's rules), as issues: shared by the API's schema and the CLI. */
export function agentLimitProblems(l: { agent?: string; concurrency?: number | undefined; ratePerSecond?: number | undefined; burst?: number | undefined; key?: string | undefined; perKeyConcurrency?: number | undefined; perKeyRatePerSecond?: number | undefined; perKeyBurst?: number | undefined; pausePerKey?: boolean | undefined }): { path: string; message: string }[] {
  const out: { path: string; message: string }[] = [];
  const agent = l.agent ?? '<agent>';
  const limits = l.concurrency !== undefined || l.ratePerSecond !== undefined || l.perKeyConcurrency !== undefined || l.perKeyRatePerSecond !== undefined || l.pausePerKey === true;
  if (!limits) {
    out.push(
      l.key !== undefined
        ? { path: 'key', message: '--key alone limits nothing: add --concurrency or --rate (its steps then take turns by key), or a per-key limit' }
        : { path: 'concurrency', message: `a limit needs --concurrency, --rate, --per-key-concurrency, --per-key-rate or --pause-per-key (to remove one: triad limits clear ${agent})` },
    );
  }
  if (l.burst !== undefined && l.ratePerSecond === undefined) out.push({ path: 'burst', message: '--burst applies to --rate: add --rate (e.g. --rate 100/s --burst 20)' });
  if (l.key === undefined) {
    if (l.perKeyConcurrency !== undefined) out.push({ path: 'perKeyConcurrency', message: '--per-key-concurrency limits each value of --key separately: add --key (e.g. --key input.customerId)' });
    if (l.perKeyRatePerSecond !== undefined) out.push({ path: 'perKeyRatePerSecond', message: '--per-key-rate limits each value of --key separately: add --key (e.g. --key input.customerId)' });
    if (l.pausePerKey === true) out.push({ path: 'pausePerKey', message: '--pause-per-key pauses each value of --key separately: add --key (e.g. --key input.customerId)' });
  }
  if (l.perKeyBurst !== undefined && l.perKeyRatePerSecond === undefined) out.push({ path: 'perKeyBurst', message: '--per-key-burst applies to --per-key-rate: add --per-key-rate (e.g. --per-key-rate 10/s)' });
  return out;
}

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

/**
 * A rate as people write it (decision 0020 §1.8): `100/s`, `6000/m`, `1/h`, `0.5/s`, or a bare number
 * per second; returns per second, or the problem naming `flag`.
 */
export function parseRate(text: string, flag = '--rate'): { ok: true; perSecond: number } | { ok: false; message: string } {
  const m = /^\s*(\d+(?:\.\d+)?)\s*(?:\/\s*(s|m|h))?\s*$/.exec(text);
  if (!m) return { ok: false, message: `${flag} ${JSON.stringify(text)} is not a rate: write <count>/s, /m or /h (e.g. 100/s, 600/m, 0.5/s); a bare number is per second` };
  const n = Number(m[1]);
  const perSecond = m[2] === 'm' ? n / 60 : m[2] === 'h' ? n / 3600 : n;
  if (perSecond < 1 / 3600 - 1e-12) return { ok: false, message: `${flag} ${text.trim()} is too slow: at least 1/h` };
  if (perSecond > 100_000) return { ok: false, message: `${flag} ${text.trim()} is above 100000/s` };
  return { ok: true, perSecond };
}

/** A rate per second as `triad limits` shows it: per second when at least 1/s, else per minute, else per hour. */
export function formatRate(perSecond: number): string {
  const short = (n: number): string => String(Math.round(n * 100) / 100);
  if (perSecond >= 1) return `${short(perSecond)}/s`;
  if (perSecond * 60 >= 1) return `${short(perSecond * 60)}/m`;
  return `${short(perSecond * 3600)}/h`;
}
