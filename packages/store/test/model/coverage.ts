// What the model-based runs exercised, counted across runs (printed with FC_STATS=1): outcomes per
// operation, expiry actions, and the task and step states reached — so a silent pass can be judged.
import type { Model } from './model.js';

const counts = new Map<string, number>();

export function count(key: string): void {
  counts.set(key, (counts.get(key) ?? 0) + 1);
}

/** Counts the states the model is in after a transition (each state once per transition). */
export function countStates(model: Model): void {
  const seen = new Set<string>();
  for (const t of model.tasks.values()) {
    seen.add(`task ${t.status}`);
    for (const s of t.steps.values()) {
      seen.add(`step ${s.status}${s.comp?.parked ? ' (compensation parked)' : ''}${s.run.reported && s.status === 'processing' ? ' (reported)' : ''}`);
      if (s.status === 'compensating' && s.effect === 'unknown') seen.add('compensation of an in-doubt step');
      if (s.spec.forEach) seen.add(`fan-out step ${s.status}${t.status === 'compensating' && (s.fe?.live.length ?? 0) > 0 ? ' (draining)' : ''}`);
      for (const e of s.elements ?? []) seen.add(`fan-out element ${e.status}${e.run.reported && e.status === 'processing' ? ' (reported)' : ''}`);
    }
  }
  for (const k of seen) count(k);
}

export function coverageReport(): string {
  return [...counts]
    .sort((a, b) => (a[0] < b[0] ? -1 : 1))
    .map(([k, n]) => `${k.padEnd(48)} ${n}`)
    .join('\n');
}
