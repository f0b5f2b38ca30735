/** The fuzz run's messages: drafts for every target from one seed, turned into bytes, interleaved across subjects. */
import { HUGE_KINDS, draftsFor, materialize, type Draft, type SizeLimits } from './generators.js';
import type { Target } from './targets.js';

export interface FuzzCase {
  /** Unique in the run; also the last token of the case's reply subject. */
  id: number;
  target: Target;
  draft: Draft;
  /** The reply subject a submission names (REPLY in the draft, replaced). */
  replyTo: string;
  bytes: Uint8Array;
}

export interface CaseOptions {
  targets: readonly Target[];
  seed: number;
  /** Messages in total, spread evenly over the targets. */
  messages: number;
  now: number;
  /** The byte limits of a target's subject (its stream's max_msg_size, or the server's max_payload). */
  limits: (t: Target) => SizeLimits;
  /** Reply subjects are `<inbox>.<case id>`. */
  inbox: string;
  /** At most this many huge messages per target (default: one of each kind). */
  hugePerTarget?: number;
}

/** Huge messages per target: one of each kind (or `max`) once a target gets 50 messages, fewer before. */
export function hugePerTarget(count: number, max = HUGE_KINDS): number {
  return Math.min(max, HUGE_KINDS, Math.floor(count / 10));
}

export function buildCases(o: CaseOptions): FuzzCase[] {
  const t = o.targets.length;
  const perTarget = o.targets.map((target, i) => {
    const count = Math.floor(o.messages / t) + (i < o.messages % t ? 1 : 0);
    // One seed per target, derived from the run's, so each target's messages are reproducible on their own.
    return draftsFor(target, { seed: (o.seed + (i + 1) * 1_000_003) | 0, count, huge: hugePerTarget(count, o.hugePerTarget), now: o.now, limits: o.limits(target) });
  });
  // Round-robin over the targets, so every consumer is stormed at once.
  const cases: FuzzCase[] = [];
  const longest = Math.max(0, ...perTarget.map((d) => d.length));
  for (let k = 0; k < longest; k++) {
    perTarget.forEach((drafts, i) => {
      const draft = drafts[k];
      if (!draft) return;
      const id = cases.length;
      const replyTo = `${o.inbox}.${id}`;
      cases.push({ id, target: o.targets[i]!, draft, replyTo, bytes: materialize(draft, replyTo) });
    });
  }
  return cases;
}
