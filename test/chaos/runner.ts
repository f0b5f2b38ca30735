// The chaos run (issue #10 item 5, issue #16's ledger check): the example's orders workflow on real
// processes — 2 schedulers, 2 supervisors, 3 agent hosts — against a private nats-server (JetStream,
// data kept) and redis-server (AOF on), under seeded random faults; then the faults stop, the run waits
// for every accepted task to end, and checks the services' ledgers against what Triad reported.
//
// Faults, during the window of `minutes`, each lane on its own seeded stream (faults.ts):
// - actors: kill -9 (a replacement is started at once) and SIGSTOP/SIGCONT (0.3–3.5 s) of a scheduler,
//   an agent host, the supervisor leader (found from the leadership lease) or a follower; the first
//   eight go through every action × target once;
// - servers: one NATS and one Redis crash (SIGKILL), down 0.5–2 s, restarted on their data;
// - services: every 1.5–4 s each service gets a spell — healthy, failing (503 at 10–60 %), down (503
//   always), hanging (5–30 % of requests never answered) or slow (200–1300 ms);
// - cancels: `cancelRate` of the tasks are cancelled 0.05–2 s after their submission, mostly while a
//   step is in flight — the orphan-effect scenario of issue #16.
// - signals (decision 0019): three quarters of the orders that wait for approval are approved 0.05–2.5 s
//   after their submission — before the wait starts (kept), during it, or after its timeout (refused);
//   the others time out and are undone.
// `tasks` submissions are spread evenly over the window. Then the faults stop (services healed, paused
// processes resumed, each kind back at its count: that moment is `faultsStoppedAt`) and the run polls
// every accepted task until all are terminal or the wait limit passes.
//
// The verdict (check.ts), over every service's ledger (`effects()`: run keys `<ns>/<taskId>/<step>`,
// undo keys `<ns>/<taskId>/<step>/compensate`) and every task's final `client.getTask`:
// - lost: an accepted task not terminal at the wait limit (`faultsStoppedAt + bound + allowance + grace`,
//   grace = half of bound + allowance, so a late task shows as unbounded rather than lost).
// - duplicate_effects: a key applied twice (on two services), an effect reverted more than once, a key
//   that is not the run key of a submitted task's step served by that service, an effect undone by a
//   key other than its step's compensation key, or a (task, step) applied under more than one key.
// - orphan_effects: for a task that ended cancelled or compensated, an applied (not tombstone) effect
//   of a step that declares a compensation and was never undone. wrong_undos: an effect undone (or a
//   tombstone) of a task that completed.
// - unbounded: a terminal task whose finishedAt is later than max(createdAt, faultsStoppedAt) + bound +
//   allowance, where bound = taskBound(definition, { sweepIntervalMs, leaderLeaseMs }).totalMs with the
//   supervisors' actual interval and lease, and allowance = one scheduler ack wait (5 s: a message a
//   process took before the faults stopped may come back that late).
// - max_recovery_ms: the longest of the recoveries. After a NATS or Redis restart: from the server being
//   back to the first moment a task that was in flight at the crash is recorded terminal in Redis (the
//   run reads the last 32 submissions accepted before the crash every 100 ms; a task that had ended
//   before the crash does not count). Observed, not taken from finishedAt: a transition queued in a client
//   during a Redis outage carries the time it was issued. After a supervisor leader kill: from the kill
//   to the first sweep of another leader (its lastSweepAt). Unmeasured ones are counted apart.
// The run passes when lost, duplicate_effects, orphan_effects and unbounded are all 0.
// With --limits (decision 0020 §9.4) payment is limited (at most 3 at once, 1 per customer of 5) through
// the run; the verdict adds: payment's own maxInFlight ≤ 3, nothing in flight and nothing waiting in its
// limiter once every task ended, no task failed by a throttle — and leaves unbounded out (waiting for a
// limit is outside a definition's bounds, §5.6).
import { randomInt, randomUUID } from 'node:crypto';
import { TriadError, isTerminal, type TaskState } from '@triad/protocol';
import type { RemoteService } from '@triad/example-orders';
import { TaskStore } from '@triad/store';
import { sleep, startNats, startRedis, waitFor, type Teardown } from '../harness/index.js';
import { SERVICE_NAMES, startTriad, type TestTriad } from '../support/triad.js';
import { check, checkLimits, passed, type LimitsVerdict, type Verdict } from './check.js';
import { actorLane, faultLog, MAX_LATENCY_MS, serverLane, serviceLane, type FaultCounts, type FaultLog } from './faults.js';
import { FLEET_SIZE, Fleet } from './fleet.js';
import type { ChaosOptions } from './options.js';
import { Random } from './random.js';
import { CHAOS_APPROVAL_OVER, CHAOS_SIGNAL, CHAOS_SUPERVISION, chaosBound, chaosOrdersWorkflow } from './workflow.js';

/** The scheduler's JetStream ack wait (packages/scheduler: ackWaitMs default): the delivery allowance. */
export const SCHEDULER_ACK_WAIT_MS = 5_000;
/** Circuit breakers half-open this soon, so a healed service is called again within the chaos bounds. */
const BREAKER_HALF_OPEN_MS = 1_000;
const POLL_CONCURRENCY = 16;

export interface ChaosReport extends Verdict {
  seed: number;
  minutes: number;
  ok: boolean;
  faults: FaultCounts;
  /** Cancels sent, accepted by a scheduler, and refused by error code (a finished task: INVALID_STATE, …). */
  cancels: { sent: number; accepted: number; refused: Record<string, number> };
  /** Approval signals sent, by outcome (delivered, buffered, duplicate) or refusal code (decision 0019). */
  signals: { sent: number; outcomes: Record<string, number> };
  max_recovery_ms: number | null;
  recovery_ms: { nats: number | null; redis: number | null; leader_kill: number | null; unmeasured: number };
  bound_ms: number;
  allowance_ms: number;
  wait_limit_ms: number;
  /** From faultsStoppedAt until the last accepted task was terminal (or the wait limit). */
  drain_ms: number;
  duration_ms: number;
  /** With --limits: the limits lane's verdict (then `unbounded` is reported but not judged: waits are outside the bound). */
  limits?: LimitsVerdict;
}

/** The limits lane's limit on payment (decision 0020 §9.4). */
const CHAOS_LIMIT = { concurrency: 3, key: 'input.customerId', perKeyConcurrency: 1 } as const;
/** Customers the limits lane's orders belong to (their key). */
const CHAOS_CUSTOMERS = 5;

export interface RunContext {
  teardown: Teardown;
  /** Progress lines (the CLI prints them on stderr). */
  progress?: (line: string) => void;
}

export async function runChaos(o: ChaosOptions, ctx: RunContext): Promise<ChaosReport> {
  const progress = ctx.progress ?? (() => undefined);
  const seed = o.seed ?? randomInt(0, 2 ** 31 - 1);
  const root = new Random(seed);
  const rnd = { submissions: root.fork(), actors: root.fork(), servers: root.fork(), services: root.fork() };
  const serviceStreams = new Map(SERVICE_NAMES.map((name) => [name, root.fork()]));
  progress(`chaos: seed ${seed} (replay with --seed ${seed}), ${o.tasks} tasks over ${o.minutes} min`);
  const startedAt = Date.now();

  const { definition, bound } = chaosBound(CHAOS_SUPERVISION);
  const allowanceMs = SCHEDULER_ACK_WAIT_MS;
  const graceMs = Math.ceil((bound.totalMs + allowanceMs) / 2);

  const [nats, redis] = await Promise.all([startNats({ teardown: ctx.teardown }), startRedis({ teardown: ctx.teardown, aof: true })]);
  const supervision = { intervalMs: CHAOS_SUPERVISION.sweepIntervalMs, leaseMs: CHAOS_SUPERVISION.leaderLeaseMs };
  const t = await startTriad(ctx.teardown, { nats, redis }, {
    schedulers: FLEET_SIZE.scheduler,
    supervisors: FLEET_SIZE.supervisor,
    agentProcesses: FLEET_SIZE.agents,
    supervisor: supervision,
    registerOrders: false,
    env: { TRIAD_BREAKER_HALF_OPEN_MS: String(BREAKER_HALF_OPEN_MS) },
    serviceRandom: (name) => {
      const stream = serviceStreams.get(name)!;
      return () => stream.float();
    },
  });
  await t.client.registerWorkflow(chaosOrdersWorkflow());
  if (o.limits) {
    await t.client.setAgentLimit('payment', CHAOS_LIMIT);
    // Every scheduler applies it within TRIAD_LIMITS_REFRESH_MS (1 s): no charge goes out unlimited.
    await sleep(1_300);
    t.services.payment.resetStats();
    progress(`chaos: limits lane — payment at most ${CHAOS_LIMIT.concurrency} at once, ${CHAOS_LIMIT.perKeyConcurrency} per customer`);
  }
  const fleet = await Fleet.adopt(t, supervision);
  // Recovery is observed in the state store itself, so a client's own reconnect does not enter it.
  const store = new TaskStore(t.redis, t.namespace);
  const services: RemoteService[] = SERVICE_NAMES.map((n) => t.services[n]);
  progress(`chaos: namespace ${t.namespace}; task bound ${bound.totalMs} ms + allowance ${allowanceMs} ms`);

  // The fault window.
  const windowMs = Math.round(o.minutes * 60_000);
  const windowStart = Date.now();
  const log = faultLog();
  const subs: Submissions = { accepted: [], acceptedAt: [], unacknowledged: [], cancels: { sent: 0, accepted: 0, refused: {} }, signals: { sent: 0, outcomes: {} }, inFlight: [] };
  const lane = { log, until: windowStart + windowMs, progress };
  // Settled, never rejected, so a lane that fails mid-window is not an unhandled rejection; rethrown below.
  const lanes = Promise.allSettled([
    actorLane(lane, fleet, rnd.actors, CHAOS_SUPERVISION.leaderLeaseMs),
    serverLane(lane, { nats, redis }, rnd.servers, windowStart, (at, backAt) => firstEndAfter(store, subs, at, backAt, bound.totalMs + allowanceMs)),
    serviceLane(lane, services, rnd.services),
  ]);
  await submitAll(t, subs, o, rnd.submissions, windowStart, windowMs, log, progress);

  // Stop the faults: lanes finish the fault they are in, then everything is healed and counts restored.
  const failed = (await lanes).find((r): r is PromiseRejectedResult => r.status === 'rejected');
  if (failed) throw new Error(`a fault lane failed, so the run cannot be judged: ${failed.reason instanceof Error ? failed.reason.message : String(failed.reason)}`, { cause: failed.reason });
  for (const s of services) s.setFaults({ failRate: 0, hangRate: 0, latencyMs: 0 });
  await fleet.heal();
  const faultsStoppedAt = Date.now();
  await Promise.all([...subs.inFlight, ...log.measuring]);
  progress(`chaos: faults stopped; ${subs.accepted.length} accepted, ${subs.unacknowledged.length} not accepted; waiting for every task to end`);

  // Wait for every accepted task to be terminal, or the wait limit.
  const waitLimit = faultsStoppedAt + bound.totalMs + allowanceMs + graceMs;
  const states = new Map<string, TaskState>();
  const open = new Set(subs.accepted);
  const maybe = new Set(subs.unacknowledged);
  let lastReport = 0;
  for (;;) {
    await poll(t, [...open, ...maybe], states, (id) => {
      open.delete(id);
      maybe.delete(id);
    });
    if (open.size === 0 || Date.now() >= waitLimit) break;
    if (Date.now() - lastReport > 5_000) {
      lastReport = Date.now();
      progress(`chaos: ${open.size} tasks not terminal yet (${Math.round((waitLimit - Date.now()) / 1000)} s to the wait limit)`);
    }
    await sleep(250);
  }
  const drainMs = Date.now() - faultsStoppedAt;
  // A request still waiting out a slow service's latency applies after it: read the ledgers once no
  // service holds one (a hang is released when its agent gives up at complete-by and closes it).
  await waitFor(() => services.every((s) => s.waiting().length === 0) || undefined, {
    timeoutMs: MAX_LATENCY_MS + bound.totalMs + 30_000,
    intervalMs: 50,
    what: 'no request left waiting in a service (each service\'s waiting() empty)',
  });
  const ledgers = Object.fromEntries(services.map((s) => [s.name, s.effects()]));

  const verdict = check({
    namespace: t.namespace,
    definition,
    accepted: subs.accepted,
    unacknowledged: subs.unacknowledged,
    states,
    ledgers,
    boundMs: bound.totalMs,
    allowanceMs,
    faultsStoppedAt,
  });
  const recovery = recoveries(log);
  const limits = o.limits ? await limitsLane(t, states, CHAOS_SUPERVISION.sweepIntervalMs) : undefined;
  return {
    seed,
    minutes: o.minutes,
    // With limits, waiting is outside the bound (decision 0020 §5.6): unbounded is reported, not judged.
    ok: limits ? passed({ ...verdict, unbounded: 0 }) && limits.ok : passed(verdict),
    ...(limits ? { limits } : {}),
    ...verdict,
    faults: log.counts,
    cancels: subs.cancels,
    signals: subs.signals,
    ...recovery,
    bound_ms: bound.totalMs,
    allowance_ms: allowanceMs,
    wait_limit_ms: waitLimit - faultsStoppedAt,
    drain_ms: drainMs,
    duration_ms: Date.now() - startedAt,
  };
}

/**
 * The limits lane's checks once every task ended: payment's own maxInFlight over the run, and the limiter
 * back to nothing in flight and nothing waiting within a budget + the permit grace + a few sweeps.
 */
async function limitsLane(t: TestTriad, states: ReadonlyMap<string, TaskState>, intervalMs: number): Promise<LimitsVerdict> {
  let last = { inFlight: -1, waiting: -1 };
  const until = Date.now() + 1_500 + 1_000 + 3 * intervalMs + 10_000;
  for (;;) {
    const p = (await t.client.agentLimits({ agent: 'payment' }).catch(() => []))[0];
    if (p) last = { inFlight: p.inFlight, waiting: p.waiting };
    if ((last.inFlight === 0 && last.waiting === 0) || Date.now() > until) break;
    await sleep(250);
  }
  return checkLimits({ concurrency: CHAOS_LIMIT.concurrency, maxInFlight: t.services.payment.stats().maxInFlight, inFlightAfter: last.inFlight, waitingAfter: last.waiting, states });
}

interface Submissions {
  accepted: string[];
  /** When each accepted submission was acknowledged, in the order of `accepted`. */
  acceptedAt: number[];
  unacknowledged: string[];
  cancels: ChaosReport['cancels'];
  signals: ChaosReport['signals'];
  /** Submissions and cancels still under way when the window closed. */
  inFlight: Promise<void>[];
}

/**
 * Submits `tasks` orders evenly over the window, each without waiting for the previous one; a share of
 * them is cancelled a random while later. Every random choice is drawn before the submission, so
 * timing does not change what a seed picks.
 */
async function submitAll(t: TestTriad, s: Submissions, o: ChaosOptions, rnd: Random, windowStart: number, windowMs: number, log: FaultLog, progress: (line: string) => void): Promise<void> {
  const gapMs = windowMs / o.tasks;
  for (let i = 0; i < o.tasks; i++) {
    await sleep(windowStart + i * gapMs - Date.now());
    const taskId = randomUUID();
    const cancelAfterMs = rnd.chance(o.cancelRate) ? rnd.between(50, 2_000) : undefined;
    // Zero to three lines: ship fans out over the reservation's lines (none: the order as a whole, one line).
    const lines = rnd.int(0, 3);
    const input = { orderId: `chaos-${i}`, amount: rnd.int(1, 500), ...(lines > 0 ? { items: Array.from({ length: lines }, (_x, l) => ({ sku: `sku-${l}`, qty: 1 + l })) } : {}) };
    const signalAfterMs = input.amount > CHAOS_APPROVAL_OVER && rnd.chance(0.75) ? rnd.between(50, 2_500) : undefined;
    // The limits lane's key (drawn last, and only then, so a seed's other choices stay what they were).
    if (o.limits) Object.assign(input, { customerId: `c-${rnd.int(0, CHAOS_CUSTOMERS - 1)}` });
    s.inFlight.push(
      (async () => {
        try {
          await t.client.submit('orders', input, { taskId });
          s.accepted.push(taskId);
          s.acceptedAt.push(Date.now());
        } catch {
          s.unacknowledged.push(taskId);
          return;
        }
        if (signalAfterMs !== undefined) {
          await sleep(signalAfterMs);
          s.signals.sent++;
          const outcome = await t.client.signal(taskId, CHAOS_SIGNAL, { approvedBy: 'chaos' }, { id: `chaos-${taskId}` }).then(
            (r) => r.outcome,
            (e: unknown) => (e instanceof TriadError ? e.code : 'ERROR'),
          );
          s.signals.outcomes[outcome] = (s.signals.outcomes[outcome] ?? 0) + 1;
        }
        if (cancelAfterMs === undefined) return;
        await sleep(cancelAfterMs);
        log.count('cancel');
        s.cancels.sent++;
        try {
          await t.client.cancel(taskId, 'chaos: cancelled while running');
          s.cancels.accepted++;
        } catch (e) {
          // Finished already, not created yet, or NATS down: the task just runs on.
          const code = e instanceof TriadError ? e.code : 'ERROR';
          s.cancels.refused[code] = (s.cancels.refused[code] ?? 0) + 1;
        }
      })(),
    );
    if (i > 0 && i % Math.max(1, Math.round(o.tasks / 10)) === 0) progress(`chaos: ${i}/${o.tasks} submitted`);
  }
}

/** How many of the submissions accepted last before a crash the recovery measurement watches. */
const RECOVERY_SAMPLE = 32;

/** See max_recovery_ms in the header: from `backAt` until a task in flight at the crash is read as terminal. */
async function firstEndAfter(store: TaskStore, subs: Submissions, at: number, backAt: number, timeoutMs: number): Promise<number | undefined> {
  const before = subs.acceptedAt.findIndex((acceptedAt) => acceptedAt >= at);
  const watched = subs.accepted.slice(0, before === -1 ? subs.accepted.length : before).slice(-RECOVERY_SAMPLE);
  if (watched.length === 0) return undefined;
  try {
    const seenAt = await waitFor(
      async () => {
        const states = await Promise.all(watched.map((id) => store.getTask(id)));
        return states.some((s) => s !== undefined && isTerminal(s.status) && (s.finishedAt ?? s.updatedAt) >= at) ? Date.now() : undefined;
      },
      { timeoutMs, intervalMs: 100, what: 'a task in flight at the crash to end' },
    );
    return seenAt - backAt;
  } catch {
    return undefined;
  }
}

/** Reads the given tasks (a few requests at a time); `done` is told of each that is terminal. */
async function poll(t: TestTriad, ids: string[], states: Map<string, TaskState>, done: (id: string) => void): Promise<void> {
  for (let i = 0; i < ids.length; i += POLL_CONCURRENCY) {
    await Promise.all(
      ids.slice(i, i + POLL_CONCURRENCY).map(async (id) => {
        const s = await t.client.getTask(id).catch(() => undefined);
        if (!s) return;
        states.set(id, s);
        if (isTerminal(s.status)) done(id);
      }),
    );
  }
}

/** max_recovery_ms and its parts (see the header for the definitions). */
function recoveries(log: FaultLog): Pick<ChaosReport, 'max_recovery_ms' | 'recovery_ms'> {
  const out: ChaosReport['recovery_ms'] = { nats: null, redis: null, leader_kill: null, unmeasured: 0 };
  const key = { restart_nats: 'nats', restart_redis: 'redis', kill_supervisor_leader: 'leader_kill' } as const;
  for (const f of log.recoveryFaults) {
    if (f.recoveryMs === undefined) {
      out.unmeasured++;
      continue;
    }
    const k = key[f.kind];
    out[k] = Math.max(out[k] ?? 0, f.recoveryMs);
  }
  const parts = [out.nats, out.redis, out.leader_kill].filter((x): x is number => x !== null);
  return { recovery_ms: out, max_recovery_ms: parts.length > 0 ? Math.max(...parts) : null };
}
