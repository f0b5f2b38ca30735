/**
 * Dispatch limits in words and tables (decision 0020 §6): `triad limits`'s output and the dashboard's
 * limits page (its bundle includes this module, so it stays pure and imports no runtime code).
 */
import type { AgentLimitStatus, StoredAgentLimit } from '@triad/protocol';
import { formatRate } from '@triad/protocol/constants';
import { clock, duration, table } from './format.js';

/** One limit in words: `at most 20 at once, 100/s (burst 20); per input.customerId: at most 2 at once`. */
export function describeLimit(l: Omit<StoredAgentLimit, 'agent' | 'setAt'>): string {
  const parts: string[] = [];
  if (l.concurrency !== undefined) parts.push(`at most ${l.concurrency} at once`);
  if (l.ratePerSecond !== undefined) parts.push(`${formatRate(l.ratePerSecond)}${l.burst !== undefined && l.burst > 1 ? ` (burst ${l.burst})` : ''}`);
  const perKey: string[] = [];
  if (l.perKeyConcurrency !== undefined) perKey.push(`at most ${l.perKeyConcurrency} at once`);
  if (l.perKeyRatePerSecond !== undefined) perKey.push(`${formatRate(l.perKeyRatePerSecond)}${l.perKeyBurst !== undefined && l.perKeyBurst > 1 ? ` (burst ${l.perKeyBurst})` : ''}`);
  if (l.pausePerKey) perKey.push('a Retry-After pauses only its key');
  let text = parts.join(', ');
  if (l.key !== undefined) text += `${text ? '; ' : ''}per ${l.key}: ${perKey.length > 0 ? perKey.join(', ') : 'keys take turns'}`;
  return text || 'no limit';
}

/** The columns of `triad limits list` and of the dashboard's limits page. */
export const LIMIT_HEADERS = ['AGENT', 'IN FLIGHT', 'LIMIT', 'RATE NOW', 'RATE', 'WAITING', 'OLDEST', 'KEY', 'PER KEY', 'PAUSED'] as const;
export const KEY_HEADERS = ['KEY', 'IN FLIGHT', 'WAITING', 'OLDEST', 'BLOCKED'] as const;

/** One agent type's row (decision 0020 §6). */
export function limitRow(s: AgentLimitStatus, now: number = Date.now()): string[] {
  const l = s.limit;
  return [
    s.agent,
    count(s.inFlight),
    l?.concurrency !== undefined ? count(l.concurrency) : '—',
    `${Math.round(s.ratePerSecondNow * 10) / 10}/s`,
    l?.ratePerSecond !== undefined ? `${formatRate(l.ratePerSecond)}${l.burst !== undefined && l.burst > 1 ? ` (${l.burst})` : ''}` : '—',
    count(s.waiting),
    s.oldestWaitMs !== undefined ? duration(s.oldestWaitMs) : '—',
    l?.key ?? '—',
    l?.key !== undefined ? describeLimit({ ...(l.perKeyConcurrency !== undefined ? { perKeyConcurrency: l.perKeyConcurrency } : {}), ...(l.perKeyRatePerSecond !== undefined ? { perKeyRatePerSecond: l.perKeyRatePerSecond } : {}) }).replace(/^no limit$/, 'turns') : '—',
    s.draining ? 'draining (cleared)' : s.pausedUntil !== undefined && s.pausedUntil > now ? `until ${hhmmss(s.pausedUntil)} (Retry-After)` : '—',
  ];
}

/**
 * One key's row: BLOCKED says `paused until 12:00:03` (a Retry-After of its key), `at 2 at once` (its
 * per-key concurrency is full), `rate until 12:00:01` (its per-key rate), or `—`.
 */
export function keyRow(k: NonNullable<AgentLimitStatus['keys']>[number], limit: AgentLimitStatus['limit'], now: number = Date.now()): string[] {
  const blocked =
    k.pausedUntil !== undefined && k.pausedUntil > now
      ? `paused until ${hhmmss(k.pausedUntil)}`
      : k.blockedUntil === 'concurrency'
        ? limit?.perKeyConcurrency !== undefined
          ? `at ${count(limit.perKeyConcurrency)} at once`
          : 'at its limit'
        : k.blockedUntil !== undefined
          ? `rate until ${hhmmss(k.blockedUntil)}`
          : '—';
  return [k.key === '' ? '(none)' : k.key, count(k.inFlight), count(k.waiting), k.oldestWaitMs !== undefined ? duration(k.oldestWaitMs) : '—', blocked];
}

/** `triad limits list`'s table, and with `--keys` each agent type's keys with the most waiting (decision 0020 §6). */
export function limitsTable(ls: readonly AgentLimitStatus[], now: number = Date.now()): string {
  let text = `dispatch limits (per agent type)\n${table(LIMIT_HEADERS, ls.map((s) => limitRow(s, now)))}`;
  for (const s of ls) {
    if (!s.keys || s.keys.length === 0) continue;
    text += `\n\n${s.agent}: keys with the most waiting\n${table(KEY_HEADERS, s.keys.map((k) => keyRow(k, s.limit, now)))}`;
  }
  return text;
}

const count = (n: number): string => n.toLocaleString('en-US');
const hhmmss = (ms: number): string => clock(ms).slice(0, 8);
