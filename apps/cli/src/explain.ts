/**
 * What `triad status` and the dashboard ask beside the task's state to say why its steps wait (decision
 * 0021 §3.3, §3.6): the probe of each attempt in flight (which agent instance holds it), its agent type's
 * queue when none answered, and the supervisors' status when a deadline passed. Every read is optional:
 * one that fails (a client identity may not probe) leaves its part out and the text says less.
 */
import type { TaskState } from '@triad/protocol';
import type { TriadClient } from '@triad/client';
import { explainNeeds, probeKey, type Holder, type WaitContext } from './waiting.js';

export async function gatherWaitContext(client: TriadClient, task: TaskState, now: number): Promise<WaitContext> {
  const need = explainNeeds(task, now);
  const ctx: WaitContext = {};
  const jobs: Promise<void>[] = [];
  // A client identity (it reads its own tasks only: NATS refused it the namespace-wide reads) may not
  // probe nor read the agents' queues: asking would only be refused (and logged) by NATS.
  if (need.probes.length > 0 && client.taskReads === 'all') {
    jobs.push(
      (async () => {
        const answers = await client.probe(need.probes.map((p) => ({ agent: p.agent, taskId: task.taskId, step: p.step, kind: p.phase === 'compensate' ? 'compensate' : 'run', attempt: p.attempt })));
        const probes: Record<string, Holder | null> = {};
        need.probes.forEach((p, i) => {
          const a = answers[i];
          probes[probeKey(p.phase, p.step, p.attempt)] = a ? { agentId: a.agentId, since: a.since, try: a.try, state: a.state, ...(a.nextTryAt !== undefined ? { nextTryAt: a.nextTryAt } : {}) } : null;
        });
        ctx.probes = probes;
        const unanswered = need.probes.filter((_, i) => !answers[i]).map((p) => p.agent);
        if (unanswered.length > 0) ctx.queues = await client.agentQueues(unanswered).catch(() => ({}));
      })().catch(() => undefined),
    );
  }
  if (need.supervisor) {
    jobs.push(
      client
        .supervisorStatus()
        .then((s) => {
          const leader = s.leader ? s.supervisors.find((x) => x.supervisorId === s.leader?.id) : undefined;
          ctx.supervisor = s.leader ? { leader: { id: s.leader.id, ...(leader?.lastSweepAt !== undefined ? { lastSweepAt: leader.lastSweepAt } : {}) } } : {};
        })
        .catch(() => undefined),
    );
  }
  await Promise.all(jobs);
  return ctx;
}
