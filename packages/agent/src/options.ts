/**
 * The agent host's settings: one zod schema whose input is what callers pass and whose output is what the
 * host uses, every default applied here and nowhere else (the breaker's too, per agent type).
 */
import { z } from 'zod';
import { DEFAULT_INLINE_MAX_BYTES, DEFAULT_MAX_OBJECT_BYTES, MIN_INLINE_MAX_BYTES, ErrorCode, TriadError } from '@triad/protocol';

export const BreakerSettingsSchema = z.object({
  /** Consecutive retryable failures that open the breaker. */
  threshold: z.number().int().min(1).default(5),
  /** How long it stays open before one call is let through. */
  halfOpenAfterMs: z.number().int().min(1).default(5_000),
});

export const AgentHostSettingsSchema = z.object({
  /** Subtracted from completeBy for clock skew between the scheduler's and this machine's clocks. */
  safetyMarginMs: z.number().int().min(0).default(50),
  /**
   * How long a step request may go without a sign of life before JetStream gives it to another agent
   * (the consumer's ack wait); the host signals every third of it while the step runs.
   */
  ackWaitMs: z.number().int().min(100).default(5_000),
  /** Outputs whose encoding is above this many bytes go to the object store (TRIAD_INLINE_MAX_BYTES; decision 0021 §4.1). */
  inlineMaxBytes: z.number().int().min(MIN_INLINE_MAX_BYTES).max(1_000_000 - 65_536).default(DEFAULT_INLINE_MAX_BYTES),
  /** The largest object read or written (TRIAD_MAX_OBJECT_BYTES). */
  maxObjectBytes: z.number().int().min(1024).default(DEFAULT_MAX_OBJECT_BYTES),
});

export type AgentHostSettings = z.input<typeof AgentHostSettingsSchema>;
export type ResolvedAgentHostSettings = z.output<typeof AgentHostSettingsSchema>;

function resolve<S extends z.ZodType>(schema: S, input: z.input<S>, what: string): z.output<S> {
  const parsed = schema.safeParse(input);
  if (parsed.success) return parsed.data;
  const details = parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`);
  throw new TriadError(ErrorCode.InvalidConfig, `invalid ${what}: ${details.join('; ')}`, { details });
}

export function resolveAgentHostSettings(input: AgentHostSettings): ResolvedAgentHostSettings {
  return resolve(AgentHostSettingsSchema, input, 'agent host settings');
}

export function resolveBreakerSettings(agent: string, input: z.input<typeof BreakerSettingsSchema> = {}): z.output<typeof BreakerSettingsSchema> {
  return resolve(BreakerSettingsSchema, input, `circuit breaker settings of agent "${agent}"`);
}
