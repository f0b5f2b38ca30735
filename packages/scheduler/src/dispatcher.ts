/**
 * Turns a transition's output into messages: step requests to agents and task events to the events
 * stream and the submitter's private reply subject. Message ids make every publish safe to repeat.
 * Alerts are not sent from here: the transition records them and the leader supervisor publishes them
 * (decision 0009).
 */
import { publishDurable, sendTaskEvents, type Bus } from '@triad/bus';
import { idempotencyKey } from '@triad/core';
import { encode, unpackTrusted, type RegisteredWorkflow, type StepKind, type StepRequest } from '@triad/protocol';
import { countTaskEnd } from '@triad/telemetry';
import { toTaskEvent, type Transition } from '@triad/store';

export function stepMessageId(taskId: string, step: string, kind: StepKind, attempt: number): string {
  return `${taskId}:${step}:${kind}:${attempt}`;
}

/**
 * The step requests one transition dispatches, as agents receive them: the task input and the outputs
 * each step declares it needs unpacked, its retry policy, and for a compensation the key of the run it
 * undoes. Pure; `Dispatcher.publish` sends them.
 */
export function stepRequests(namespace: string, taskId: string, wf: RegisteredWorkflow, t: Transition, now: number): StepRequest[] {
  if (t.dispatch.length === 0) return [];
  const input = t.input && t.input.length > 0 ? unpackTrusted(t.input) : undefined;
  const outputs = new Map<string, unknown>();
  for (const [name, bytes] of t.outputs) outputs.set(name, bytes.length > 0 ? unpackTrusted(bytes) : undefined);
  return t.dispatch.map((d) => {
    const def = wf.steps.find((s) => s.name === d.step);
    const retry = (d.kind === 'compensate' ? def?.compensate?.retry : def?.retry) ?? wf.defaults.retry;
    const needs: Record<string, unknown> = {};
    for (const n of d.needs) needs[n] = outputs.get(n);
    const req: StepRequest = {
      taskId,
      workflow: wf.name,
      version: wf.version,
      step: d.step,
      agent: d.agent,
      kind: d.kind,
      attempt: d.attempt,
      idempotencyKey: idempotencyKey(namespace, taskId, d.step, d.kind),
      completeBy: d.completeBy,
      input,
      needs,
      dispatchedAt: now,
    };
    if (retry) req.retry = retry;
    if (d.kind === 'compensate') {
      req.undoes = idempotencyKey(namespace, taskId, d.step, 'run');
      req.effect = d.effect ?? 'unknown';
    }
    return req;
  });
}

export class Dispatcher {
  constructor(private readonly bus: Bus) {}

  /** Sends the step requests and events of one transition; resolves when JetStream has stored them all. */
  async publish(taskId: string, wf: RegisteredWorkflow, t: Transition, now: number): Promise<void> {
    // The transition's reply carries the task's createdAt (the process runs its own scripts): no read.
    countTaskEnd(this.bus.names.namespace, wf.name, t.events, t.createdAt, now);
    const work: Promise<unknown>[] = [];
    for (const req of stepRequests(this.bus.names.namespace, taskId, wf, t, now)) {
      work.push(publishDurable(this.bus, this.bus.names.subjects.step(req.agent), encode(req), stepMessageId(taskId, req.step, req.kind, req.attempt)));
    }
    // Events are history, not state (decision 0001): sent without asking for JetStream's ack. Publishes
    // on one connection keep their order in the stream.
    sendTaskEvents(this.bus, t.client, taskId, t.events.map((e) => toTaskEvent(taskId, e, now)), t.replyTo);
    await Promise.all(work);
  }
}
