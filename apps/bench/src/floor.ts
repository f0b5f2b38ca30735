/**
 * The transition floor: what a step costs in CPU with every message taken away. One process does, for
 * N tasks of S sequential steps (64 in flight, like the scheduler), the work a step needs whatever
 * carries it: the submission decoded and validated, createTask, and per step the request and the result
 * encoded, decoded and validated, applyResult, the lease releases, and each transition's
 * events encoded. No NATS, no actors. Its CPU (this process plus redis-server) per step is a floor under
 * any batching of the messages: if it is near a baseline round trip's CPU, no batching reaches the
 * baseline. The bench client's own share (submitting tasks, reading their events) is left out, so the
 * floor is, if anything, low.
 */
import { compilePlan, validateDefinition } from '@triad/core';
import {
  StepRequestSchema,
  SubmissionSchema,
  decode,
  decodeResults,
  encode,
  type RedisConnectionOptions,
  type RegisteredWorkflow,
  type StepResult,
  type TaskEventBatch,
} from '@triad/protocol';
import { stepRequests } from '@triad/scheduler';
import { Leases, TaskStore, connectRedis, toTaskEvent, type Transition } from '@triad/store';
import { removeKeys } from './cleanup.js';
import { cpuPerUnit, cpuWindow, type CpuShare, type ProcessRef } from './cpu.js';

export interface FloorResult {
  tasks: number;
  steps: number;
  elapsedMs: number;
  /** CPU ms per step: this process and redis-server (when the bench started it). */
  cpuMsPerStep: number;
  /** Whether redis-server's CPU is in cpuMsPerStep (not with --use-env: its pid is not known). */
  includesRedis: boolean;
  cpu: CpuShare[];
}

const IN_FLIGHT = 64;

export async function measureTransitionFloor(
  redisConnection: RedisConnectionOptions,
  namespace: string,
  tasks: number,
  steps: number,
  redisServer: readonly ProcessRef[],
): Promise<FloorResult> {
  const ns = `${namespace}-floor`;
  const redis = await connectRedis(redisConnection, { connectionName: 'triad-bench-floor' });
  try {
    const store = new TaskStore(redis, ns);
    const leases = new Leases(redis, ns);
    const def = validateDefinition({
      name: 'floor',
      steps: Array.from({ length: steps }, (_, i) => ({ name: `s${i + 1}`, agent: 'floor', budgetMs: 600_000, ...(i > 0 ? { dependsOn: [`s${i}`] } : {}) })),
    });
    const wf: RegisteredWorkflow = { ...def, version: 1, registeredAt: Date.now() };
    const plan = compilePlan(def);
    const run = async (i: number): Promise<void> => {
      const taskId = `floor-${i.toString().padStart(8, '0')}-0000-4000-8000-000000000000`;
      const sub = decode(encode({ taskId, workflow: 'floor', input: {}, replyTo: '_INBOX.floor', submittedAt: Date.now() }), SubmissionSchema, 'submission');
      if (!sub.ok) throw sub.error;
      let lease = leases.task(taskId);
      const created = await store.createTask({ lease, taskId, workflow: 'floor', version: 1, input: encode(sub.value.input), plan, onFailure: 'error', client: 'floor', now: Date.now(), schedulerId: 'floor' });
      void leases.release(lease);
      if (!created.created) throw new Error(`floor task ${taskId} already existed`);
      let t: Transition = created.transition;
      encodeEvents(taskId, t);
      for (;;) {
        // The dispatcher's own request builder, then what the agent decodes.
        const [built] = stepRequests(ns, taskId, wf, t, Date.now());
        if (!built) break;
        const req = decode(encode(built), StepRequestSchema, 'step request');
        if (!req.ok) throw req.error;
        const d = req.value;
        const result: StepResult = { taskId, step: d.step, kind: d.kind, attempt: d.attempt, agentId: 'floor-agent', finishedAt: Date.now(), tries: 1, ok: true, output: {} };
        const decoded = decodeResults(encode(result));
        const item = decoded.ok ? decoded.value.items[0] : undefined;
        if (!item?.ok) throw new Error('floor result did not decode');
        lease = leases.task(taskId);
        const applied = await store.applyResult({ lease, taskId, step: d.step, kind: d.kind, attempt: d.attempt, now: Date.now(), schedulerId: 'floor', agentId: 'floor-agent', agentType: 'floor', outcome: { ok: true, output: encode(item.value.ok ? item.value.output : undefined) } });
        void leases.release(lease);
        if (!applied.applied) throw new Error(`floor result for ${taskId}/${d.step} not applied: ${applied.reason}`);
        t = applied.transition;
        encodeEvents(taskId, t);
      }
      if (t.status !== 'completed') throw new Error(`floor task ${taskId} ended ${t.status}`);
    };
    // Warm-up (JIT, script cache), then the measured tasks.
    const warm = Math.min(200, tasks);
    await pool(warm, run, 0);
    const cpu = cpuWindow(redisServer);
    const t0 = performance.now();
    await pool(tasks, run, warm);
    const elapsedMs = performance.now() - t0;
    const shares = cpu.end(elapsedMs).map((c) => (c.name === 'bench client' ? { ...c, name: 'bench process (the transitions)' } : c));
    await removeKeys(redis, `triad:${ns}:*`);
    return { tasks, steps, elapsedMs, cpuMsPerStep: cpuPerUnit(shares, tasks * steps), includesRedis: redisServer.length > 0, cpu: shares };
  } finally {
    redis.disconnect();
  }
}

function encodeEvents(taskId: string, t: Transition): void {
  const now = Date.now();
  const batch: TaskEventBatch = { taskId, events: t.events.map((e) => toTaskEvent(taskId, e, now)) };
  encode(batch);
}

/** Runs `count` tasks, `IN_FLIGHT` at a time; task numbers start at `base`. */
async function pool(count: number, run: (i: number) => Promise<void>, base: number): Promise<void> {
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < count) await run(base + next++);
  };
  await Promise.all(Array.from({ length: Math.min(IN_FLIGHT, count) }, worker));
}
