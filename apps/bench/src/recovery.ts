/**
 * Recovery: an agent process is SIGKILLed while it runs a step (the `stall` agent hangs on its first
 * attempt); the time from the kill until the step completes on its retry, taken by another agent
 * process, is compared with the bound complete-by budget + supervisor interval. And the supervisor
 * leader is SIGKILLed: the time until another leads is compared with lease + lease/3.
 */
import { performance } from 'node:perf_hooks';
import type { Redis } from 'ioredis';
import type { TriadClient } from '@triad/client';
import type { StartedProcess } from '@triad/launcher';
import { keys } from '@triad/store';
import type { Actors } from './actors.js';
import { Completions } from './completions.js';
import { sleep, withTimeout } from './timing.js';

export interface RecoveryOptions {
  samples: number;
  budgetMs: number;
  intervalMs: number;
  leaseMs: number;
}

export interface RecoveryResult extends RecoveryOptions {
  /** Kill → the step's `completed`, per sample, ms. */
  killToDoneMs: number[];
  /** Kill → the supervisor's retry decision (`step_retried` event), per sample, ms. */
  killToRetryMs: number[];
  maxMs: number;
  /** budget + supervisor interval: the bound while the supervisor leader lives. */
  boundMs: number;
}

export async function measureRecovery(actors: Actors, client: TriadClient, workflow: string, o: RecoveryOptions): Promise<RecoveryResult> {
  const retriedAt = new Map<string, number>();
  const completions = new Completions(client, (ev, at) => {
    if (ev.type === 'step_retried') retriedAt.set(ev.taskId, at);
  });
  const killToDoneMs: number[] = [];
  const killToRetryMs: number[] = [];
  // Two processes serve the stall agent; whichever takes the step is killed the moment it starts it, and
  // the other takes the retry. The replacement is started after the sample, outside the measurement.
  const pool: StartedProcess[] = await actors.agents(['stall'], 2);
  /**
   * A few tasks that do not stall, one at a time, so both processes have run the step path before the
   * clock runs (a process' first step pays for its cold code, which is not what recovery measures).
   */
  const warm = async (label: string): Promise<void> => {
    for (let w = 0; w < 8; w++) {
      const id = `rec-warm-${process.pid}-${label}-${w}`;
      const done = completions.completion(id);
      await client.submit(workflow, { stall: false }, { taskId: id, replyTo: completions.subject });
      await withTimeout(done, 15_000, `recovery warm-up task ${id}`);
    }
  };
  try {
    await warm('start');
    for (let i = 0; i < o.samples; i++) {
      const taskId = `rec-${process.pid}-${Date.now().toString(36)}-${i}`;
      const done = completions.completion(taskId);
      await client.submit(workflow, { stall: true }, { taskId, replyTo: completions.subject });
      const started = new RegExp(`bench-stall-started ${taskId}`);
      const holder = await Promise.any(pool.map((c) => c.waitForOutput(started, 15_000).then(() => c))).catch(() => {
        throw new Error(`recovery sample ${i + 1}: neither stall agent started task ${taskId} within 15 s; last output:\n${pool.map((c) => `${c.name}:\n${c.tail(1_000)}`).join('\n')}`);
      });
      const killedAt = performance.now();
      await holder.kill();
      const at = await withTimeout(done, o.budgetMs + o.intervalMs + o.leaseMs + 15_000, `recovery sample ${i + 1}: task ${taskId} after its agent was killed`);
      killToDoneMs.push(at - killedAt);
      const r = retriedAt.get(taskId);
      if (r !== undefined) killToRetryMs.push(r - killedAt);
      pool.splice(pool.indexOf(holder), 1, await actors.agent(['stall']));
      await warm(String(i));
    }
  } finally {
    await Promise.all(pool.map((c) => c.stop()));
    await completions.close();
  }
  return { ...o, killToDoneMs, killToRetryMs, maxMs: Math.max(...killToDoneMs), boundMs: o.budgetMs + o.intervalMs };
}

export interface HandoverOptions {
  samples: number;
  leaseMs: number;
}

export interface HandoverResult extends HandoverOptions {
  /** kill -9 of the leader → another supervisor leads with a higher epoch (its leader record), per sample, ms. */
  killToLeaderMs: number[];
  maxMs: number;
  /** lease + lease/3: the dead leader's lease lapses, and a candidate asks again within a fraction of it (decision 0004). */
  boundMs: number;
}

/** The supervisors of the run, as the bench holds them: the one running now, and how to start another. */
export interface SupervisorPool {
  current(): StartedProcess;
  replace(next: StartedProcess): void;
  start(): Promise<StartedProcess>;
}

/**
 * Leadership handover: with the sole supervisor leading (so the one killed is certainly the leader), a
 * second one is started and seen campaigning (its health report names the leader), the leader is
 * SIGKILLed, and the time until the other holds the lease and has raised the epoch (the leader record in
 * Redis, written under the lease) is measured. The survivor is the next sample's leader.
 */
export async function measureHandover(pool: SupervisorPool, redis: Redis, namespace: string, o: HandoverOptions): Promise<HandoverResult> {
  const k = keys(namespace);
  const record = async (): Promise<{ id: string; epoch: number } | undefined> => {
    const v = await redis.get(k.supervisorLeader);
    if (!v) return undefined;
    const sep = v.lastIndexOf('|');
    return { id: v.slice(0, sep), epoch: Number(v.slice(sep + 1)) };
  };
  const until = async <T>(what: string, probe: () => Promise<T | undefined>, timeoutMs: number, everyMs: number): Promise<T> => {
    const deadline = performance.now() + timeoutMs;
    for (;;) {
      const v = await probe();
      if (v !== undefined) return v;
      if (performance.now() > deadline) throw new Error(`leader handover: ${what} within ${timeoutMs} ms`);
      await sleep(everyMs);
    }
  };
  const killToLeaderMs: number[] = [];
  for (let i = 0; i < o.samples; i++) {
    const leader = await until('no supervisor led', record, o.leaseMs * 3 + 10_000, 20);
    const follower = await pool.start();
    // The follower campaigns: its report names the leader (so it is not still starting when the clock runs).
    await until(
      'the second supervisor did not report the leader',
      async () => {
        const reports = Object.values(await redis.hgetall(k.supervisorStatus)).map((v) => JSON.parse(v) as { supervisorId?: string; leading?: boolean; leader?: string });
        return reports.some((r) => r.supervisorId !== leader.id && r.leading === false && r.leader === leader.id) || undefined;
      },
      15_000,
      20,
    );
    const killedAt = performance.now();
    await pool.current().kill('SIGKILL');
    await until('no other supervisor led after the kill', async () => {
      const r = await record();
      return r && r.id !== leader.id && r.epoch > leader.epoch ? r : undefined;
    }, o.leaseMs * 3 + 10_000, 2);
    killToLeaderMs.push(performance.now() - killedAt);
    pool.replace(follower);
    // The dead one's last report stays in the status hash; it names the old leader, never the new one.
    await redis.hdel(k.supervisorStatus, leader.id);
  }
  return { ...o, killToLeaderMs, maxMs: Math.max(...killToLeaderMs), boundMs: Math.round(o.leaseMs + o.leaseMs / 3) };
}
