// The chaos run's fault lanes, each on its own seeded stream until the fault window closes: actor kills
// and pauses (every kind, the supervisor leader included), one NATS and one Redis crash-and-restart,
// and the services' failing, down, hanging and slow spells.
import type { Faults, RemoteService } from '@triad/example-orders';
import { sleep, waitFor, type NatsServer, type RedisServer } from '../harness/index.js';
import type { Actor, ActorKind, Fleet } from './fleet.js';
import type { Random } from './random.js';

/** Counts by kind: kill_scheduler, pause_supervisor_leader, restart_nats, service_slow, cancel, … */
export type FaultCounts = Record<string, number>;

/** A fault after which the time to recover is measured; `recoveryMs` stays undefined when it could not be. */
export interface RecoveryFault {
  kind: 'restart_nats' | 'restart_redis' | 'kill_supervisor_leader';
  at: number;
  recoveryMs: number | undefined;
}

export interface FaultLog {
  counts: FaultCounts;
  recoveryFaults: RecoveryFault[];
  /** Recovery measurements still under way: they outlive the window, so the faults can stop meanwhile. */
  measuring: Promise<void>[];
  count(kind: string): void;
  /** Records `fault` and fills its recoveryMs when `measure` resolves (undefined: not measured). */
  measure(fault: Omit<RecoveryFault, 'recoveryMs'>, measure: Promise<number | undefined>): void;
}

export function faultLog(): FaultLog {
  const log: FaultLog = {
    counts: {},
    recoveryFaults: [],
    measuring: [],
    count: (kind) => void (log.counts[kind] = (log.counts[kind] ?? 0) + 1),
    measure: (fault, measure) => {
      const entry: RecoveryFault = { ...fault, recoveryMs: undefined };
      log.recoveryFaults.push(entry);
      log.measuring.push(measure.then((ms) => void (entry.recoveryMs = ms), () => undefined));
    },
  };
  return log;
}

/** Measures the recovery after a server restart: given the crash and the moment the server was back. */
export type RestartRecovery = (at: number, backAt: number) => Promise<number | undefined>;

/** Longest SIGSTOP: past the leadership lease (2 s) and a step budget (1.5 s), so pauses depose and expire. */
export const MAX_PAUSE_MS = 3_500;
/** Slowest a slow service gets: under the 1.5 s budget, so a slow step is in flight for long, and answers. */
export const MAX_LATENCY_MS = 1_300;
/** Longest a server stays down before its restart. */
const MAX_SERVER_DOWN_MS = 2_000;

type Target = 'scheduler' | 'agents' | 'supervisor_leader' | 'supervisor_follower';
type ActorFault = { action: 'kill' | 'pause'; target: Target };
const ACTOR_FAULTS: readonly ActorFault[] = (['kill', 'pause'] as const).flatMap((action) =>
  (['scheduler', 'agents', 'supervisor_leader', 'supervisor_follower'] as const).map((target) => ({ action, target })),
);

export interface LaneContext {
  log: FaultLog;
  /** The fault window closes at this time (epoch ms); a lane finishes the fault it is in, then returns. */
  until: number;
  progress: (line: string) => void;
}

/**
 * Kills (then replaces) and pauses (then resumes) one actor at a time. The first faults go through every
 * action × target once in a random order, so even a short window hits every kind; then they are random.
 * A leader kill also starts measuring the takeover: until another supervisor leads and has swept.
 */
export async function actorLane(ctx: LaneContext, fleet: Fleet, rnd: Random, leaseMs: number): Promise<void> {
  const coverage = rnd.shuffle(ACTOR_FAULTS);
  while (Date.now() < ctx.until) {
    await sleep(rnd.between(300, 1_500));
    if (Date.now() >= ctx.until) break;
    const fault = coverage.shift() ?? rnd.pick(ACTOR_FAULTS);
    const pauseMs = rnd.between(300, MAX_PAUSE_MS);
    const found = await target(fleet, fault.target, rnd);
    if (!found) continue;
    const { actor, name } = found;
    if (fault.action === 'pause') {
      ctx.log.count(`pause_${name}`);
      fleet.pause(actor);
      await sleep(pauseMs);
      fleet.resume(actor);
    } else {
      ctx.log.count(`kill_${name}`);
      const at = Date.now();
      await fleet.kill(actor);
      if (name === 'supervisor_leader' && actor.supervisorId !== undefined) {
        ctx.log.measure({ kind: 'kill_supervisor_leader', at }, takeover(ctx, fleet, actor.supervisorId, at, leaseMs));
      }
      await fleet.start(actor.kind);
    }
    ctx.progress(`fault: ${fault.action} ${name} ${actor.process.name}`);
  }
}

/** The actor a fault aims at; a leader that cannot be told (Redis down, a change under way) falls back to any supervisor. */
async function target(fleet: Fleet, t: Target, rnd: Random): Promise<{ actor: Actor; name: string } | undefined> {
  const running = (kind: ActorKind): Actor[] => fleet.live(kind).filter((a) => !a.paused);
  if (t === 'scheduler' || t === 'agents') {
    const candidates = running(t);
    return candidates.length > 0 ? { actor: rnd.pick(candidates), name: t } : undefined;
  }
  const supervisors = running('supervisor');
  if (supervisors.length === 0) return undefined;
  const leader = await fleet.leader().catch(() => undefined);
  if (leader && !leader.paused) {
    if (t === 'supervisor_leader') return { actor: leader, name: t };
    const followers = supervisors.filter((a) => a !== leader);
    if (followers.length > 0) return { actor: rnd.pick(followers), name: t };
  }
  return { actor: rnd.pick(supervisors), name: 'supervisor' };
}

/** From a leader's kill to the first sweep of another leader (its own report of lastSweepAt). */
async function takeover(ctx: LaneContext, fleet: Fleet, killedId: string, at: number, leaseMs: number): Promise<number | undefined> {
  try {
    const sweptAt = await waitFor(
      async () => {
        const { reports } = await fleet.supervisorStatus();
        const next = reports.find((r) => r.supervisorId !== killedId && r.leading && (r.lastSweepAt ?? 0) >= at);
        return next?.lastSweepAt;
      },
      // Generous: a NATS or Redis outage may overlap the takeover; unmeasured is reported, not failed.
      { timeoutMs: 3 * leaseMs + 15_000, intervalMs: 50, what: `a supervisor other than ${killedId} to lead and sweep` },
    );
    return sweptAt - at;
  } catch {
    ctx.progress(`recovery: no new leader seen sweeping after the kill of ${killedId}`);
    return undefined;
  }
}

/** One NATS crash (SIGKILL) and one Redis crash, each down for a random while, then restarted on their data. */
export async function serverLane(ctx: LaneContext, servers: { nats: NatsServer; redis: RedisServer }, rnd: Random, startedAt: number, recovery: RestartRecovery): Promise<void> {
  const window = ctx.until - startedAt;
  const plan = [
    { kind: 'restart_nats' as const, server: servers.nats, at: startedAt + window * rnd.between(0.15, 0.4) },
    { kind: 'restart_redis' as const, server: servers.redis, at: startedAt + window * rnd.between(0.55, 0.8) },
  ];
  for (const step of plan) {
    const downMs = rnd.between(500, MAX_SERVER_DOWN_MS);
    await sleep(step.at - Date.now());
    ctx.log.count(step.kind);
    const at = Date.now();
    await step.server.kill();
    await sleep(downMs);
    await step.server.restart();
    const backAt = Date.now();
    ctx.log.measure({ kind: step.kind, at }, recovery(at, backAt));
    ctx.progress(`fault: ${step.kind} (down ${backAt - at} ms)`);
  }
}

type Spell = 'healthy' | 'fail' | 'down' | 'hang' | 'slow';
const SPELLS: readonly [Spell, number][] = [['healthy', 0.37], ['fail', 0.18], ['down', 0.07], ['hang', 0.15], ['slow', 0.23]];

/**
 * Every 1.5–4 s each service gets a new spell: healthy, failing (503 at 10–60 %), down (503 always:
 * breakers open, ladders climb, some tasks are undone), hanging (5–30 % never answered), or slow.
 */
export async function serviceLane(ctx: LaneContext, services: readonly RemoteService[], rnd: Random): Promise<void> {
  while (Date.now() < ctx.until) {
    for (const s of services) {
      const spell = weighted(rnd, SPELLS);
      const f: Faults = { failRate: 0, hangRate: 0, latencyMs: 0, rateLimit: 0 };
      if (spell === 'fail') f.failRate = rnd.between(0.1, 0.6);
      if (spell === 'down') f.failRate = 1;
      if (spell === 'hang') f.hangRate = rnd.between(0.05, 0.3);
      if (spell === 'slow') f.latencyMs = Math.round(rnd.between(200, MAX_LATENCY_MS));
      s.setFaults(f);
      if (spell !== 'healthy') ctx.log.count(`service_${spell}`);
    }
    await sleep(Math.min(rnd.between(1_500, 4_000), Math.max(0, ctx.until - Date.now())));
  }
}

function weighted<T>(rnd: Random, options: readonly [T, number][]): T {
  let x = rnd.float() * options.reduce((sum, [, w]) => sum + w, 0);
  for (const [value, w] of options) {
    x -= w;
    if (x < 0) return value;
  }
  return options[options.length - 1]![0];
}
