/**
 * One fuzz run: starts NATS, Redis and a Triad (scheduler, supervisor and order agents as real
 * processes), storms every consumed subject with generated messages, waits for Triad to settle, checks
 * everything, submits a valid order, and summarises.
 */
import { DEFAULT_CLIENT_ID, DEFAULT_MAX_MESSAGE_BYTES, ErrorCode, isTerminal, isTriadError, type TaskState } from '@triad/protocol';
import { startNats, startRedis, waitFor, type ActorProcess, type Teardown } from '../harness/index.js';
import { startTriad, type TestTriad } from '../support/triad.js';
import { buildCases, type FuzzCase } from './cases.js';
import { checkCases, type CaseCheckResult, type CheckName, type Failure } from './checks.js';
import { readDeadLetters } from './dead-letters.js';
import { ProcessWatch, serverClosedConnections, type ProcessReport } from './processes.js';
import { ReplyCollector, storm, type Outcome } from './storm.js';
import { targets, type Target } from './targets.js';

const FAILURES_SHOWN_PER_CHECK = 5;

export interface FuzzOptions {
  /** Messages in total, spread over every consumed subject. */
  messages: number;
  seed: number;
  /** Messages in flight at once (default 32). */
  concurrency?: number;
  /** Huge messages per subject, at most (default: one of each kind, five). */
  hugePerSubject?: number;
  /** How long Triad may take to drain its streams and end the accepted tasks (default 60 s). */
  settleTimeoutMs?: number;
  /** Progress lines (default: none). */
  log?: (line: string) => void;
}

export interface FuzzSummary {
  ok: boolean;
  seed: number;
  namespace: string;
  messages: number;
  bytes: number;
  durationMs: number;
  byTarget: Record<string, number>;
  byCategory: Record<string, number>;
  counts: CaseCheckResult['counts'] & { deadLetters: number; tasksAccepted: number; tasksEnded: number };
  afterStorm: string;
  processes: ProcessReport[];
  /** Handlers retried by redelivery and dead letters retried, as the actors logged them (not failures). */
  retries: Record<string, number>;
  failuresByCheck: Partial<Record<CheckName, number>>;
  /** The first few failures of each check (all of them are counted in failuresByCheck). */
  failures: Failure[];
}

/** The work streams every accepted message leaves once acknowledged or dead-lettered. */
function workStreams(t: TestTriad): string[] {
  const s = t.client.bus.names.streams;
  return [s.submit, s.steps, s.results, s.commands];
}

async function pendingOnStreams(t: TestTriad): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  for (const stream of workStreams(t)) out[stream] = (await t.client.bus.jsm.streams.info(stream)).state.messages;
  return out;
}

/** Waits for `fn` to find nothing left; returns a failure naming what was left at the deadline. */
async function settle(what: string, check: CheckName, timeoutMs: number, fn: () => Promise<string | undefined>): Promise<Failure[]> {
  let left: string | undefined = 'not checked yet';
  try {
    await waitFor(async () => (left = await fn()) === undefined, { timeoutMs, intervalMs: 200, what });
    return [];
  } catch {
    return [{ check, detail: `${what}: still ${left} after ${timeoutMs} ms` }];
  }
}

async function taskState(t: TestTriad, taskId: string): Promise<TaskState | 'unknown'> {
  try {
    return await t.client.getTask(taskId);
  } catch (e) {
    if (isTriadError(e, ErrorCode.UnknownTask)) return 'unknown';
    throw e;
  }
}

function tally(cases: readonly FuzzCase[], key: (c: FuzzCase) => string): Record<string, number> {
  const out: Record<string, number> = {};
  for (const c of cases) out[key(c)] = (out[key(c)] ?? 0) + 1;
  return out;
}

export async function runFuzz(td: Teardown, o: FuzzOptions): Promise<FuzzSummary> {
  const log = o.log ?? (() => undefined);
  const settleMs = o.settleTimeoutMs ?? 60_000;
  const started = Date.now();
  const [nats, redis] = await Promise.all([startNats({ teardown: td }), startRedis({ teardown: td })]);
  // Warnings and errors only: what the crash patterns look for, without the per-message info lines.
  const triad = await startTriad(td, { nats, redis }, { env: { TRIAD_LOG_LEVEL: 'warn' } });
  const actors = (): ActorProcess[] => [...triad.schedulers, ...triad.supervisors, ...triad.agents];
  const watch = new ProcessWatch(actors());
  const bus = triad.client.bus;
  const registry = new Map((await triad.client.listWorkflows()).map((w) => [w.name, w.versions]));

  const streamLimit = new Map<string, number>();
  for (const s of [bus.names.streams.submit, bus.names.streams.steps, bus.names.streams.results, bus.names.streams.commands]) {
    streamLimit.set(s, (await bus.jsm.streams.info(s)).config.max_msg_size);
  }
  const n = bus.names;
  const streamOf = (t: Target): string =>
    t.kind === 'submit' ? n.streams.submit : t.kind === 'step' || t.kind === 'step-batch' ? n.streams.steps : t.kind === 'result' ? n.streams.results : n.streams.commands;
  const transportLimit = (t: Target): number => (t.transport === 'jetstream' ? streamLimit.get(streamOf(t))! : bus.nc.info!.max_payload);

  // Reply subjects in the storming client's own inbox: the only ones a scheduler answers (decision 0010).
  const inbox = `${n.subjects.inboxPrefix(DEFAULT_CLIENT_ID)}._FUZZ`;
  const cases = buildCases({
    targets: targets(n, Date.now()),
    seed: o.seed,
    messages: o.messages,
    now: Date.now(),
    limits: (t) => ({ protocol: DEFAULT_MAX_MESSAGE_BYTES, transport: transportLimit(t) }),
    inbox,
    ...(o.hugePerSubject === undefined ? {} : { hugePerTarget: o.hugePerSubject }),
  });
  const bytes = cases.reduce((sum, c) => sum + c.bytes.length, 0);
  log(`fuzz: ${cases.length} messages (${(bytes / 1e6).toFixed(1)} MB) on ${new Set(cases.map((c) => c.target.name)).size} subjects, namespace ${n.namespace}; Triad started and messages built in ${Date.now() - started} ms`);
  const stormStarted = Date.now();

  const collector = new ReplyCollector(bus, inbox);
  td.add(() => collector.close());
  const stormOptions = { concurrency: o.concurrency ?? 32, requestTimeoutMs: 20_000 };
  // Registrations last: a workflow they register must not turn a refused submission into an accepted one.
  const registers = cases.filter((c) => c.target.kind === 'api' && c.target.op === 'workflow.register');
  const outcomes = new Map<number, Outcome>([
    ...(await storm(bus, cases.filter((c) => !registers.includes(c)), stormOptions)),
    ...(await storm(bus, registers, stormOptions)),
  ]);
  log(`fuzz: storm sent in ${Date.now() - stormStarted} ms; waiting for Triad to settle`);

  const failures: Failure[] = [];
  failures.push(
    ...(await settle('every consumed stream drained', 'drained', settleMs, async () => {
      const left = Object.entries(await pendingOnStreams(triad)).filter(([, m]) => m > 0);
      return left.length === 0 ? undefined : left.map(([s, m]) => `${m} on ${s}`).join(', ');
    })),
  );
  await bus.nc.flush();
  log(`fuzz: settled ${Date.now() - stormStarted} ms after the storm began; checking`);
  const dls = await readDeadLetters(bus);
  for (const m of dls.malformed) failures.push({ check: 'unexpectedDeadLetter', detail: `not a DeadLetterSchema record: ${m}` });
  const result = checkCases({
    cases,
    outcomes,
    deadLetters: dls.entries,
    replies: collector.received,
    registry,
    inbox: n.subjects.inboxPrefix(DEFAULT_CLIENT_ID),
    fitsTransport: (c) => c.bytes.length <= transportLimit(c.target),
  });
  failures.push(...result.failures);

  let ended = 0;
  failures.push(
    ...(await settle(`the ${result.tasks.length} accepted tasks ended`, 'tasks', settleMs, async () => {
      const states = await Promise.all(result.tasks.map((id) => taskState(triad, id)));
      const open = result.tasks.filter((_, i) => {
        const s = states[i]!;
        return s === 'unknown' || !isTerminal(s.status);
      });
      ended = result.tasks.length - open.length;
      return open.length === 0 ? undefined : `${open.length} not ended (${open.slice(0, 5).join(', ')})`;
    })),
  );

  let afterStorm: string;
  try {
    const state = await triad.client.run('orders', { orderId: 'after-the-storm', amount: 7 }, { timeoutMs: settleMs });
    afterStorm = state.status;
  } catch (e) {
    afterStorm = `failed: ${(e as Error).message}`;
  }
  if (afterStorm !== 'completed') failures.push({ check: 'afterStorm', detail: `the orders task after the storm ended ${afterStorm}` });
  failures.push(...watch.check(actors()));
  failures.push(...(await serverClosedConnections(nats.monitorUrl)));
  // FUZZ_DEBUG=1: the actors' output (the last 20,000 characters of each), to see what a failure did.
  if (process.env['FUZZ_DEBUG']) for (const p of actors()) log(`---- ${p.name}\n${p.output().slice(-20_000)}`);

  const failuresByCheck: Partial<Record<CheckName, number>> = {};
  for (const f of failures) failuresByCheck[f.check] = (failuresByCheck[f.check] ?? 0) + 1;
  return {
    ok: failures.length === 0,
    seed: o.seed,
    namespace: n.namespace,
    messages: cases.length,
    bytes,
    durationMs: Date.now() - started,
    byTarget: tally(cases, (c) => c.target.name),
    byCategory: tally(cases, (c) => c.draft.category),
    counts: { ...result.counts, deadLetters: dls.entries.length, tasksAccepted: result.tasks.length, tasksEnded: ended },
    afterStorm,
    processes: watch.report(),
    retries: watch.retries(),
    failuresByCheck,
    failures: Object.keys(failuresByCheck).flatMap((check) => failures.filter((f) => f.check === check).slice(0, FAILURES_SHOWN_PER_CHECK)),
  };
}
