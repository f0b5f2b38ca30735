// The chaos run's actor processes by kind: which are alive, which is paused, who leads the supervisors,
// and the way back to full strength (a replacement after each kill, every paused one resumed).
import { TaskStore } from '@triad/store';
import type { ActorProcess } from '../harness/index.js';
import type { SupervisorOptions, TestTriad } from '../support/triad.js';

export type ActorKind = 'scheduler' | 'supervisor' | 'agents';

export interface Actor {
  readonly kind: ActorKind;
  readonly process: ActorProcess;
  /** A supervisor's id (its leadership lease names it); undefined for other kinds. */
  readonly supervisorId: string | undefined;
  paused: boolean;
}

export interface SupervisorReport {
  supervisorId: string;
  leading: boolean;
  lastSweepAt?: number;
}

/** How many of each kind the run keeps alive: 2 schedulers, 2 supervisors, 3 agent hosts. */
export const FLEET_SIZE: Readonly<Record<ActorKind, number>> = { scheduler: 2, supervisor: 2, agents: 3 };

const SUPERVISOR_ID = /"supervisorId":"([^"]+)"/;

export class Fleet {
  readonly #t: TestTriad;
  readonly #supervision: SupervisorOptions;
  readonly #store: TaskStore;
  readonly #live: Actor[] = [];

  private constructor(t: TestTriad, supervision: SupervisorOptions) {
    this.#t = t;
    this.#supervision = supervision;
    // Read over Redis, not the NATS API: the leader must be found while NATS is down, too.
    this.#store = new TaskStore(t.redis, t.namespace);
  }

  /** Adopts the processes startTriad started (each kind at FLEET_SIZE) and learns the supervisors' ids. */
  static async adopt(t: TestTriad, supervision: SupervisorOptions): Promise<Fleet> {
    const fleet = new Fleet(t, supervision);
    const adopted: [ActorKind, ActorProcess[]][] = [['scheduler', t.schedulers], ['supervisor', t.supervisors], ['agents', t.agents]];
    for (const [kind, processes] of adopted) {
      if (processes.length !== FLEET_SIZE[kind]) throw new Error(`the chaos fleet needs ${FLEET_SIZE[kind]} ${kind} processes, startTriad started ${processes.length}`);
      for (const p of processes) fleet.#live.push(await fleet.#actor(kind, p));
    }
    return fleet;
  }

  live(kind?: ActorKind): Actor[] {
    return this.#live.filter((a) => kind === undefined || a.kind === kind);
  }

  /** Starts one more process of `kind` and waits until it is ready. */
  async start(kind: ActorKind): Promise<Actor> {
    const p = kind === 'scheduler' ? await this.#t.startScheduler() : kind === 'supervisor' ? await this.#t.startSupervisor(this.#supervision) : await this.#t.startAgents();
    const actor = await this.#actor(kind, p);
    this.#live.push(actor);
    return actor;
  }

  /** SIGKILL (paused or not) and wait for the exit; the actor leaves the fleet. */
  async kill(actor: Actor): Promise<void> {
    const i = this.#live.indexOf(actor);
    if (i >= 0) this.#live.splice(i, 1);
    await actor.process.kill('SIGKILL');
  }

  pause(actor: Actor): void {
    actor.process.pause();
    actor.paused = true;
  }

  resume(actor: Actor): void {
    actor.process.resume();
    actor.paused = false;
  }

  /** The supervisors' last reports and the current leader, from Redis. */
  async supervisorStatus(): Promise<{ leaderId: string | undefined; reports: SupervisorReport[] }> {
    const s = await this.#store.supervisorStatus();
    return { leaderId: s.leader?.id, reports: s.supervisors as unknown as SupervisorReport[] };
  }

  /** The live supervisor that holds the leadership lease, if it is one of ours. */
  async leader(): Promise<Actor | undefined> {
    const { leaderId } = await this.supervisorStatus();
    return this.#live.find((a) => a.kind === 'supervisor' && a.supervisorId === leaderId);
  }

  /** Resumes every paused process and starts replacements until each kind is back at FLEET_SIZE. */
  async heal(): Promise<void> {
    for (const a of this.#live) if (a.paused) this.resume(a);
    const starts: Promise<Actor>[] = [];
    for (const kind of Object.keys(FLEET_SIZE) as ActorKind[]) {
      for (let n = this.live(kind).length; n < FLEET_SIZE[kind]; n++) starts.push(this.start(kind));
    }
    await Promise.all(starts);
  }

  async #actor(kind: ActorKind, p: ActorProcess): Promise<Actor> {
    let supervisorId: string | undefined;
    if (kind === 'supervisor') {
      const line = await p.waitForOutput(/supervisor started/, 30_000);
      supervisorId = SUPERVISOR_ID.exec(line)?.[1];
      if (supervisorId === undefined) throw new Error(`${p.name} printed no supervisorId in its start line: ${line}`);
    }
    return { kind, process: p, supervisorId, paused: false };
  }
}
