/**
 * Turns a transition's output into messages: step requests to agents and task events to the events
 * stream and the submitter's private reply subject. Message ids make every publish safe to repeat.
 * Alerts are not sent from here: the transition records them and the leader supervisor publishes them
 * (decision 0009).
 */
import { publishDurable, sendTaskEvents, type Bus } from '@triad/bus';
import { idempotencyKey } from '@triad/core';
import { RawMsgpack, encodeMap, isAbsentValue, type RegisteredWorkflow, type StepKind } from '@triad/protocol';
import { countTaskEnd } from '@triad/telemetry';
import { toTaskEvent, type Transition } from '@triad/store';

export function stepMessageId(taskId: string, step: string, kind: StepKind, attempt: number): string {
  return `${taskId}:${step}:${kind}:${attempt}`;
}

/** A step request ready to publish: its agent type (the subject), its message id and its encoded bytes. */
export interface StepRequestMessage {
  agent: string;
  step: string;
  kind: StepKind;
  attempt: number;
  messageId: string;
  bytes: Uint8Array;
}

/**
 * The step requests one transition dispatches, encoded as agents receive them (a StepRequest): the task
 * input and the outputs each step declares it needs are embedded as the bytes the store holds — never
 * decoded here — with the step's retry policy, and for a compensation the key of the run it undoes.
 * Pure; `Dispatcher.publish` sends them. Throws PAYLOAD_TOO_LARGE for a request over the message limit.
 */
export function stepRequestMessages(namespace: string, taskId: string, wf: RegisteredWorkflow, t: Transition, now: number): StepRequestMessage[] {
  if (t.dispatch.length === 0) return [];
  const input = isAbsentValue(t.input) ? undefined : new RawMsgpack(t.input as Uint8Array);
  return t.dispatch.map((d) => {
    const def = wf.steps.find((s) => s.name === d.step);
    const retry = (d.kind === 'compensate' ? def?.compensate?.retry : def?.retry) ?? wf.defaults.retry;
    const needs: [string, RawMsgpack][] = [];
    for (const n of d.needs) {
      const out = t.outputs.get(n);
      if (!isAbsentValue(out)) needs.push([n, new RawMsgpack(out as Uint8Array)]);
    }
    // The fields of StepRequest, in its order; undefined ones are left out.
    const bytes = encodeMap([
      ['taskId', taskId],
      ['workflow', wf.name],
      ['version', wf.version],
      ['step', d.step],
      ['agent', d.agent],
      ['kind', d.kind],
      ['attempt', d.attempt],
      ['idempotencyKey', idempotencyKey(namespace, taskId, d.step, d.kind)],
      ['completeBy', d.completeBy],
      ['input', input],
      ['needs', new RawMsgpack(encodeMap(needs))],
      ['dispatchedAt', now],
      ['retry', retry],
      ['undoes', d.kind === 'compensate' ? idempotencyKey(namespace, taskId, d.step, 'run') : undefined],
      ['effect', d.kind === 'compensate' ? (d.effect ?? 'unknown') : undefined],
    ]);
    return { agent: d.agent, step: d.step, kind: d.kind, attempt: d.attempt, messageId: stepMessageId(taskId, d.step, d.kind, d.attempt), bytes };
  });
}

export class Dispatcher {
  constructor(private readonly bus: Bus) {}

  /** Sends the step requests and events of one transition; resolves when JetStream has stored them all. */
  async publish(taskId: string, wf: RegisteredWorkflow, t: Transition, now: number): Promise<void> {
    // The transition's reply carries the task's createdAt (the process runs its own scripts): no read.
    countTaskEnd(this.bus.names.namespace, wf.name, t.events, t.createdAt, now);
    const work: Promise<unknown>[] = [];
    for (const m of stepRequestMessages(this.bus.names.namespace, taskId, wf, t, now)) {
      work.push(publishDurable(this.bus, this.bus.names.subjects.step(m.agent), m.bytes, m.messageId));
    }
    // Events are history, not state (decision 0001): sent without asking for JetStream's ack. Publishes
    // on one connection keep their order in the stream.
    sendTaskEvents(this.bus, t.client, taskId, t.events.map((e) => toTaskEvent(taskId, e, now)), t.replyTo);
    await Promise.all(work);
  }
}
