/**
 * `triad cancel --where …` and `triad retry --where …` (decision 0021 §2): the count and a sample with
 * `--dry-run`, a confirmation above `--confirm-above` (`--yes` skips it; without a terminal the command
 * exits 2 instead of asking), progress on stderr, and an operation id that a rerun with `--op` resumes —
 * acting on each task at most once.
 */
import { createInterface } from 'node:readline/promises';
import type { Command } from 'commander';
import type { TriadClient } from '@triad/client';
import type { BulkOp, TaskStatus } from '@triad/protocol';
import { duration, isoTime, table } from './format.js';
import { filterOptions, filterText, queryFilter, tagsText, type FilterOptions } from './filters.js';
import { CliError, intArg, out, printJson, usageError } from './io.js';

export interface BulkOptions extends FilterOptions {
  dryRun?: boolean;
  yes?: boolean;
  confirmAbove: number;
  rate: number;
  op?: string;
  json?: boolean;
  reason?: string;
  step?: string;
}

const STATUSES: Record<'cancel' | 'retry', readonly TaskStatus[]> = { cancel: ['running'], retry: ['failed', 'compensation_failed'] };
const DONE_WORD: Record<'cancel' | 'retry', string> = { cancel: 'cancelled', retry: 'retried' };

/** Adds the bulk form's options to `triad cancel` / `triad retry`. */
export function bulkOptions(cmd: Command, action: 'cancel' | 'retry'): Command {
  filterOptions(cmd, { tagFlag: '--where', statuses: STATUSES[action], statusHelp: `with --where: the status to act on (${STATUSES[action].join(' or ')}; default ${STATUSES[action][0] ?? ''})` });
  return cmd
    .option('--dry-run', 'with --where: show how many tasks match and a sample; change nothing')
    .option('--yes', 'with --where: act without asking, however many tasks match')
    .option('--confirm-above <n>', 'with --where: ask for confirmation when more tasks than this match', intArg(0), 20)
    .option('--rate <n>', 'with --where: at most this many tasks a second (default 50; lower keeps more room for the running load)', intArg(1, 10_000), 50)
    .option('--op <id>', 'with --where: the operation id (default: a new one); run again with the same id to resume an interrupted operation');
}

/** Whether the options ask for the bulk form. */
export function isBulk(o: BulkOptions): boolean {
  return o.where !== undefined || o.workflow !== undefined || o.op !== undefined || o.since !== undefined || o.status !== undefined || o.client !== undefined;
}

function progressLine(action: 'cancel' | 'retry', op: BulkOp, perSecond: number, etaMs: number | undefined): string {
  const done = op.acted + op.already + op.skipped + op.missing + op.failed;
  const n = (x: number): string => x.toLocaleString('en-US');
  return `${action} ${op.id}: ${n(done)} of ~${n(op.matched)} · ${DONE_WORD[action]} ${n(op.acted)} · already ${n(op.already)} · skipped ${n(op.skipped)} · failed ${n(op.failed)} · ${perSecond.toFixed(0)}/s${etaMs !== undefined ? ` · about ${duration(etaMs)} left` : ''}`;
}

/** Whether two filters name the same tasks (key order and tag order aside). */
function sameFilter(a: object, b: object): boolean {
  const canon = (f: object): string =>
    JSON.stringify(
      Object.entries(f)
        .filter(([, v]) => v !== undefined)
        .map(([k, v]): [string, unknown] => [k, k === 'tags' ? Object.entries(v as Record<string, string>).sort() : v])
        .sort(([x], [y]) => String(x).localeCompare(String(y))),
    );
  return canon(a) === canon(b);
}

async function confirm(question: string, expected: string): Promise<boolean> {
  const rl = createInterface({ input: process.stdin, output: process.stderr });
  try {
    return (await rl.question(question)).trim() === expected;
  } finally {
    rl.close();
  }
}

/** Runs the bulk form with a connected client; returns the exit code. */
export async function runBulk(client: TriadClient, action: 'cancel' | 'retry', o: BulkOptions): Promise<number> {
  const filter = queryFilter(o);
  const status = filter.status ?? STATUSES[action][0];
  const existing = o.op ? await client.bulkOperation(o.op).catch(() => undefined) : undefined;
  if (!existing && !filter.tags && !filter.workflow) {
    throw usageError(`a bulk ${action} needs --where or --workflow: name the tasks it may act on${o.op ? ` (no operation ${o.op} exists to resume)` : ''}`);
  }
  const given = filter.tags !== undefined || filter.workflow !== undefined || filter.since !== undefined || filter.client !== undefined || o.status !== undefined;
  if (existing && given && sameFilter(existing.filter, { ...filter, status }) === false) {
    throw usageError(`operation ${existing.id} exists with another action or filter (${existing.action} ${filterText(existing.filter)}); use a new --op, or leave the filter out to resume it`);
  }
  if (existing && existing.action !== action) {
    throw usageError(`operation ${existing.id} is a ${existing.action}, not a ${action}: run triad ${existing.action} --op ${existing.id}, or use a new --op`);
  }
  const bulkFilter = existing ? existing.filter : { ...filter, status };
  const what = existing ? `${filterText(existing.filter)}, created before ${isoTime(existing.asOf)}` : filterText({ ...filter, status });
  if (!existing) {
    const { count } = await client.countTasks({ ...filter, status });
    if (o.dryRun) {
      const sample = await client.queryTasks({ ...filter, status, limit: 10 });
      out(`would ${action} ${count.toLocaleString('en-US')} tasks (${what}), about ${duration(Math.ceil((count / o.rate) * 1000))} at ${o.rate}/s${count > 0 ? ':' : ''}`);
      if (sample.tasks.length > 0) out(table(['TASK', 'WORKFLOW', 'STATUS', 'CREATED', 'TAGS'], sample.tasks.map((t) => [t.taskId, `${t.workflow}@${t.version}`, t.status, isoTime(t.createdAt), tagsText(t.tags)])));
      return 0;
    }
    if (count > o.confirmAbove && !o.yes) {
      if (!process.stdin.isTTY) {
        throw new CliError(`${count.toLocaleString('en-US')} tasks match: add --yes to act on them without a prompt (or --dry-run to see them)`, { exitCode: 2 });
      }
      const verb = action === 'cancel' ? 'Cancel' : 'Retry';
      if (!(await confirm(`${verb} ${count} tasks (${what})? Type ${count} to confirm: `, String(count)))) {
        process.stderr.write('aborted: nothing was done\n');
        return 1;
      }
    }
  } else if (o.dryRun) {
    out(`operation ${existing.id} (${existing.action}, ${what}) is ${existing.state}: ${existing.acted} ${DONE_WORD[action]}, ${existing.already + existing.skipped + existing.missing + existing.failed} other outcomes, of ~${existing.matched}`);
    return 0;
  }
  const ac = new AbortController();
  const onSigint = (): void => {
    process.stderr.write('\nstopping after the batch in flight…\n');
    ac.abort();
  };
  process.once('SIGINT', onSigint);
  const tty = process.stderr.isTTY === true;
  let lastShown = 0;
  const started = Date.now();
  try {
    const op = await client.bulk({
      action,
      filter: bulkFilter,
      ...(o.op ? { opId: o.op } : {}),
      rate: o.rate,
      ...(o.step ? { step: o.step } : {}),
      ...(o.reason ? { reason: o.reason } : {}),
      signal: ac.signal,
      onStart: (op, resumed) => process.stderr.write(`${resumed ? 'resuming' : 'operation'} ${op.id} (if interrupted, run: triad ${action} --op ${op.id} --yes)\n`),
      onProgress: (p) => {
        const now = Date.now();
        if (now - lastShown < (tty ? 250 : 5_000)) return;
        lastShown = now;
        const line = progressLine(action, p.op, p.perSecond, p.etaMs);
        process.stderr.write(tty ? `\r\x1b[2K${line}` : `${line}\n`);
      },
    });
    if (tty) process.stderr.write('\r\x1b[2K');
    const summary = `${action} ${op.id} ${op.state === 'done' ? 'done' : 'stopped'}: ${DONE_WORD[action]} ${op.acted} · already ${op.already} · skipped ${op.skipped} (no longer ${status}) · missing ${op.missing} · failed ${op.failed} in ${duration(Date.now() - started)}`;
    if (o.json) printJson(op);
    process.stderr.write(`${summary}${op.state === 'stopped' ? `\nresume with: triad ${action} --op ${op.id} --yes` : ''}\n`);
    return op.failed > 0 ? 1 : 0;
  } finally {
    process.off('SIGINT', onSigint);
  }
}
