/**
 * Turns a transition's output into messages: step requests to agents and task events to the events
 * stream and the submitter's private reply subject. Message ids make every publish safe to repeat.
 * Alerts are not sent from here: the transition records them and the leader supervisor publishes them
 * (decision 0009).
 */
import type { Bus } from '@triad/bus';
import { idempotencyKey } from '@triad/core';
import { RawMsgpack, encodeMap, isAbsentValue, objectBucket, type RegisteredWorkflow, type StepKind } from '@triad/protocol';
import { countTaskEnd, type Logger } from '@triad/telemetry';
import { elementOutputKey, elementValueKey, toTaskEvent, type Dispatch, type LimiterRequests, type Transition } from '@triad/store';
import { BatchTakers, StepSender } from './step-batches.js';
import { EventSender } from './event-batches.js';

/** A step request's message id; a fan-out element's names it (`<step>#<i>`, decision 0019 §4). */
export function stepMessageId(taskId: string, step: string, kind: StepKind, attempt: number, item?: number): string {
  return `${taskId}:${item === undefined ? step : `${step}#${item}`}:${kind}:${attempt}`;
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
  // A child step's operations go to its child task, not to an agent (ChildOperations).
  return t.dispatch.filter((d) => d.child === undefined).map((d) => {
    const def = wf.steps.find((s) => s.name === d.step);
    const retry = (d.kind === 'compensate' ? def?.compensate?.retry : def?.retry) ?? wf.defaults.retry;
    const needs: [string, RawMsgpack][] = [];
    for (const n of d.needs) {
      const out = t.outputs.get(n);
      // An element's compensation gets its element's own output, under the step's name.
      const name = d.item !== undefined && n === elementOutputKey(d.step, d.item) ? d.step : n;
      if (!isAbsentValue(out)) needs.push([name, new RawMsgpack(out as Uint8Array)]);
    }
    // A fan-out element (decision 0019 §4): its index, the list's length, and its value as the list held it.
    let item: RawMsgpack | undefined;
    if (d.item !== undefined) {
      const value = t.outputs.get(elementValueKey(d.step, d.item));
      const fields: [string, unknown][] = [
        ['index', d.item],
        ['count', d.count ?? 0],
      ];
      if (!isAbsentValue(value)) fields.push(['value', new RawMsgpack(value as Uint8Array)]);
      item = new RawMsgpack(encodeMap(fields));
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
      ['idempotencyKey', idempotencyKey(namespace, taskId, d.step, d.kind, d.item)],
      ['completeBy', d.completeBy],
      ['input', input],
      ['needs', new RawMsgpack(encodeMap(needs))],
      ['dispatchedAt', now],
      ['retry', retry],
      ['undoes', d.kind === 'compensate' ? idempotencyKey(namespace, taskId, d.step, 'run', d.item) : undefined],
      ['effect', d.kind === 'compensate' ? (d.effect ?? 'unknown') : undefined],
      ['item', item],
      // Where an output above the inline threshold goes: the task's client's bucket (decision 0021 §4.3).
      ['bucket', objectBucket(namespace, t.client)],
    ]);
    return { agent: d.agent, step: d.step, kind: d.kind, attempt: d.attempt, messageId: stepMessageId(taskId, d.step, d.kind, d.attempt, d.item), bytes };
  });
}

export interface DispatcherOptions {
  /** The most step requests per batch to an agent type that takes batches (decision 0023); 1: none. */
  stepBatchMax?: number;
  /** Whether reply subjects that read event batches get them (decision 0025); default false. */
  eventBatches?: boolean;
  logger?: Logger;
}

/** Applies a child step's operation on its child task (decision 0019 §5.2). */
export type ChildOperation = (taskId: string, wf: RegisteredWorkflow, t: Transition, d: Dispatch) => Promise<void>;

export class Dispatcher {
  /** Sends step requests: alone, or in batches to agent types that take them (decision 0023). */
  readonly steps: StepSender;
  /** Stores events and sends them to reply subjects: batched to those that read batches (decision 0025). */
  readonly events: EventSender;
  /** Where a transition's limiter requests go once its messages are out (the scheduler's FlowControl; decision 0020). */
  onLimiter: ((requests: LimiterRequests) => Promise<void>) | undefined;
  private child: ChildOperation | undefined;

  constructor(
    private readonly bus: Bus,
    o: DispatcherOptions = {},
  ) {
    const max = o.stepBatchMax ?? 1;
    this.steps = new StepSender(bus, max > 1 ? new BatchTakers(bus, o.logger) : undefined, max);
    this.events = new EventSender(bus, o.eventBatches ?? false);
  }

  /** Who applies child operations (the scheduler's ChildOperations); without one they are left to the parent's check. */
  onChildOperation(fn: ChildOperation): void {
    this.child = fn;
  }

  /** Sends the step requests and events of one transition; resolves when JetStream has stored them all. */
  async publish(taskId: string, wf: RegisteredWorkflow, t: Transition, now: number): Promise<void> {
    // The transition's reply carries the task's createdAt (the process runs its own scripts): no read.
    countTaskEnd(this.bus.names.namespace, wf.name, t.events, t.createdAt, now);
    const work: Promise<unknown>[] = [];
    for (const m of stepRequestMessages(this.bus.names.namespace, taskId, wf, t, now)) {
      work.push(this.steps.send(m.agent, m.bytes, m.messageId));
    }
    // Events are history, not state (decision 0001): sent without asking for JetStream's ack. Publishes
    // on one connection keep their order in the stream.
    this.events.send(t.client, taskId, t.events.map((e) => toTaskEvent(taskId, e, now)), t.replyTo);
    // Child operations after the parent's events, so a watcher sees the step wait before its child begins.
    const child = this.child;
    if (child) for (const d of t.dispatch) if (d.child !== undefined) work.push(child(taskId, wf, t, d));
    await Promise.all(work);
    // Queued, released and dequeued tickets reach their limiters before the caller acknowledges its message.
    if (t.limiter && this.onLimiter) await this.onLimiter(t.limiter);
  }
}
