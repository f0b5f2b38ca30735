/**
 * The task filters `triad list`, `triad count` and the bulk operations share (decision 0021 §1.7):
 * `--tag k=v` (repeatable; `--where` for the bulk forms), `--status`, `--workflow`, `--since`, `--client`.
 * Everything is checked before connecting, with the messages the submission's schema gives.
 */
import { InvalidArgumentError, type Command } from 'commander';
import { NAME_PATTERN, tagProblems, type TaskStatus } from '@triad/protocol/constants';
import { TASK_STATUSES, parseStatus, usageError } from './io.js';

/** A commander collector for a repeatable `--tag k=v`: split at the first `=`, a key given twice refused. */
export function collectTag(flag: string): (value: string, previous: Record<string, string> | undefined) => Record<string, string> {
  return (value, previous) => {
    const eq = value.indexOf('=');
    if (eq <= 0) throw new InvalidArgumentError(`${flag} must be key=value, e.g. ${flag} customer=c-42`);
    const key = value.slice(0, eq);
    const tags = { ...(previous ?? {}) };
    if (key in tags) throw new InvalidArgumentError(`${flag} ${key} given twice`);
    tags[key] = value.slice(eq + 1);
    return tags;
  };
}

/** The tags of `--tag`/`--where`, checked as a submission's are (a usage error listing every problem). */
export function checkedTags(tags: Record<string, string> | undefined, flag: string, o: { submitting?: boolean } = {}): Record<string, string> | undefined {
  if (!tags) return undefined;
  // A filter may name Triad's own keys (triad.schedule=nightly); a submission may not set them.
  const problems = tagProblems(tags, { allowReserved: !o.submitting });
  if (problems.length > 0) throw usageError(`${flag}: ${problems.join('; ')}`);
  return tags;
}

const UNITS: Record<string, number> = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/** `--since`: a duration back from `now` (`500ms 30s 10m 1h 2d`) or an ISO 8601 time; epoch ms. */
export function parseSince(value: string, now: number = Date.now()): number {
  const m = /^\s*(\d+)\s*(ms|s|m|h|d)\s*$/.exec(value);
  if (m) return Math.max(0, now - Number(m[1]) * (UNITS[m[2] ?? 'ms'] ?? 1));
  const t = /^\d{4}-\d{2}-\d{2}/.test(value) ? Date.parse(value) : Number.NaN;
  if (Number.isNaN(t)) throw new InvalidArgumentError(`"${value}" is neither a duration back from now (e.g. 30s, 10m, 1h, 2d) nor an ISO 8601 time (e.g. 2026-11-26T12:00:00Z).`);
  return t;
}

function parseName(what: string): (value: string) => string {
  return (value) => {
    if (!NAME_PATTERN.test(value)) throw new InvalidArgumentError(`"${value}" is not a ${what} name: a name starts with a letter and has at most 64 letters, digits, "_" or "-".`);
    return value;
  };
}

export interface FilterOptions {
  tag?: Record<string, string>;
  where?: Record<string, string>;
  status?: TaskStatus;
  workflow?: string;
  since?: string;
  client?: string;
}

/** Registers the filter options; `tagFlag` is `--tag` (list, count) or `--where` (bulk operations). */
export function filterOptions(cmd: Command, o: { tagFlag: '--tag' | '--where'; statuses?: readonly TaskStatus[]; statusHelp?: string }): Command {
  const statuses = o.statuses ?? TASK_STATUSES;
  const status = o.statuses
    ? (v: string): TaskStatus => {
        const s = statuses.find((x) => x === v);
        if (!s) throw new InvalidArgumentError(`"${v}" is not a status this can act on; use one of: ${statuses.join(', ')}.`);
        return s;
      }
    : parseStatus;
  return cmd
    .option(`${o.tagFlag} <key=value>`, 'only tasks with this tag (repeatable: every one must match)', collectTag(o.tagFlag))
    .option('--status <status>', o.statusHelp ?? `only tasks with this status (${statuses.join(', ')})`, status)
    .option('--workflow <name>', 'only tasks of this workflow', parseName('workflow'))
    .option('--since <when>', 'only tasks created since: a duration back from now (30s, 10m, 1h, 2d) or an ISO 8601 time')
    .option('--client <id>', 'only tasks this client submitted (operators; a client identity sees only its own anyway)', parseName('client'));
}

/** The query filter of the options (since resolved against `now`). */
export function queryFilter(o: FilterOptions, now: number = Date.now()): {
  tags?: Record<string, string>;
  status?: TaskStatus;
  workflow?: string;
  since?: number;
  client?: string;
} {
  const tags = checkedTags(o.tag ?? o.where, o.where ? '--where' : '--tag');
  let since: number | undefined;
  if (o.since !== undefined) {
    try {
      since = parseSince(o.since, now);
    } catch (e) {
      throw usageError(`--since: ${(e as Error).message}`);
    }
  }
  return {
    ...(tags ? { tags } : {}),
    ...(o.status ? { status: o.status } : {}),
    ...(o.workflow ? { workflow: o.workflow } : {}),
    ...(since !== undefined ? { since } : {}),
    ...(o.client ? { client: o.client } : {}),
  };
}

/** The filter in words, for messages: `customer=c-42, status running, workflow orders, created since …`. */
export function filterText(f: ReturnType<typeof queryFilter> & { until?: number }): string {
  const parts = Object.entries(f.tags ?? {}).map(([k, v]) => `${k}=${v}`);
  if (f.status) parts.push(`status ${f.status}`);
  if (f.workflow) parts.push(`workflow ${f.workflow}`);
  if (f.client) parts.push(`client ${f.client}`);
  if (f.since !== undefined) parts.push(`created since ${new Date(f.since).toISOString()}`);
  if (f.until !== undefined) parts.push(`created before ${new Date(f.until).toISOString()}`);
  return parts.join(', ') || 'every task';
}

/** The tags of a summary as `k=v k=v`. */
export function tagsText(tags: Record<string, string> | undefined): string {
  return Object.entries(tags ?? {})
    .map(([k, v]) => `${k}=${v}`)
    .join(' ');
}
