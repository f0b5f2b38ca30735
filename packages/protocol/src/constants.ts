/**
 * The protocol's plain constants — name patterns and the task statuses — without zod, so a program that
 * needs only these (the CLI's argument parsing and help) does not load the schemas
 * (`@triad/protocol/constants`). The schemas in names.ts and messages.ts are built from them.
 */

export const NAMESPACE_PATTERN = /^[A-Za-z0-9_-]{1,40}$/;

/** Names of workflows, steps and agents: safe as a NATS subject token, a Redis field and a stream-name part. */
export const NAME_PATTERN = /^[A-Za-z][A-Za-z0-9_-]{0,63}$/;

/** Task ids travel as a subject token (events) and inside Redis hash tags: no dots, wildcards, braces or spaces. */
export const TASK_ID_PATTERN = /^[A-Za-z0-9_:-]{1,128}$/;

/** The client identity of a process that names none (TRIAD_CLIENT_ID unset). */
export const DEFAULT_CLIENT_ID = 'default';

/** A task's statuses, in the order a task can reach them. */
export const TASK_STATUSES = ['running', 'completed', 'failed', 'compensating', 'compensated', 'compensation_failed', 'cancelled'] as const;
export type TaskStatus = (typeof TASK_STATUSES)[number];
export const TERMINAL_TASK_STATUSES: readonly TaskStatus[] = ['completed', 'failed', 'compensated', 'compensation_failed', 'cancelled'];
/** Whether a task status is terminal; a status this version does not know is not (protocol §9). */
export function isTerminal(status: string): boolean {
  return (TERMINAL_TASK_STATUSES as readonly string[]).includes(status);
}

/** A throttled result's pause when the service gave no Retry-After (decision 0020 §5.1), ms. */
export const DEFAULT_THROTTLE_RETRY_AFTER_MS = 1_000;
/**
 * The feature a scheduler announces in its discovery metadata (`features`) and a supervisor in its health
 * report (`features`) when it runs dispatch limits (decision 0020 §1.8): a limit is set only when every
 * running one does, since an older scheduler would dead-letter the limits' commands.
 */
export const LIMITS_FEATURE = 'limits1';
/** The longest pause a Retry-After can ask for (decision 0020 §1.5: `MAX_PAUSE_MS`), ms. */
export const MAX_THROTTLE_RETRY_AFTER_MS = 3_600_000;
/** Search attributes (decision 0021 §1): at most this many tags a submission sets (Triad's own `triad.` keys aside). */
export const MAX_TAGS = 16;
/** A tag's value: at most this many bytes of UTF-8. */
export const MAX_TAG_VALUE_BYTES = 128;
/** A tag's key: a letter, then at most 31 letters, digits, "_", "." or "-". */
export const TAG_KEY_PATTERN = /^[A-Za-z][A-Za-z0-9_.-]{0,31}$/;
/** Keys under this prefix are set by Triad (a schedule's, a child's), never by a submitter. */
export const RESERVED_TAG_PREFIX = 'triad.';

/**
 * What is wrong with a set of tags, one sentence each (empty: they are valid). Shared by the submission's
 * schema and the CLI's check of `--tag` before it connects, so both say the same.
 */
export function tagProblems(tags: Readonly<Record<string, unknown>>, o: { allowReserved?: boolean } = {}): string[] {
  const problems: string[] = [];
  const entries = Object.entries(tags);
  const own = entries.filter(([k]) => !k.startsWith(RESERVED_TAG_PREFIX)).length;
  if (own > MAX_TAGS) problems.push(`tags: ${own} tags; at most ${MAX_TAGS}`);
  for (const [key, value] of entries) {
    if (!TAG_KEY_PATTERN.test(key)) {
      problems.push(`tags: key "${key}" must start with a letter and have at most 32 letters, digits, "_", "." or "-"`);
      continue;
    }
    if (key.startsWith(RESERVED_TAG_PREFIX) && !o.allowReserved) {
      problems.push(`tags: key "${key}" is reserved for Triad`);
      continue;
    }
    if (typeof value !== 'string') {
      problems.push(`tags.${key}: the value must be a string`);
      continue;
    }
    const bytes = new TextEncoder().encode(value).length;
    if (bytes === 0) problems.push(`tags.${key}: the value is empty; at least 1 byte`);
    else if (bytes > MAX_TAG_VALUE_BYTES) problems.push(`tags.${key}: the value is ${bytes} bytes; at most ${MAX_TAG_VALUE_BYTES}`);
    if (/[\u0000-\u001f\u007f]/.test(value)) problems.push(`tags.${key}: the value must not contain control characters`);
  }
  return problems;
}

// Dispatch limits (decision 0020): pure, so the CLI checks its flags without loading zod.

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
