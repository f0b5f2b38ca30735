/**
 * Sends the cases to a running Triad — JetStream publishes for the consumed streams, requests for the
 * API — a bounded number at a time, and records what came back: the publish ack or NATS' refusal, the
 * API reply, and everything published to the cases' reply subjects.
 */
import type { Subscription } from '@nats-io/nats-core';
import type { Bus } from '@triad/bus';
import { errorMessage } from '@triad/protocol';
import type { FuzzCase } from './cases.js';

export type Outcome =
  | { kind: 'published' }
  /** NATS (the server or the client library) refused the message: it never reached a Triad process. */
  | { kind: 'refused'; error: string }
  | { kind: 'reply'; data: Uint8Array }
  /** A request that got no reply in time. */
  | { kind: 'no-reply'; error: string };

export interface StormOptions {
  /** Messages in flight at once. */
  concurrency: number;
  /** How long an API request waits for its reply. */
  requestTimeoutMs: number;
}

/** Collects what is published to the cases' reply subjects (`<inbox>.<case id>`). */
export class ReplyCollector {
  readonly received = new Map<string, Uint8Array[]>();
  private readonly sub: Subscription;

  constructor(bus: Bus, inbox: string) {
    this.sub = bus.nc.subscribe(`${inbox}.>`, {
      callback: (err, msg) => {
        if (err) return;
        const list = this.received.get(msg.subject) ?? [];
        list.push(msg.data);
        this.received.set(msg.subject, list);
      },
    });
  }

  close(): void {
    this.sub.unsubscribe();
  }
}

async function send(bus: Bus, c: FuzzCase, o: StormOptions): Promise<Outcome> {
  if (c.target.transport === 'jetstream') {
    try {
      await bus.js.publish(c.target.subject, c.bytes);
      return { kind: 'published' };
    } catch (e) {
      return { kind: 'refused', error: errorMessage(e) };
    }
  }
  try {
    const m = await bus.nc.request(c.target.subject, c.bytes, { timeout: o.requestTimeoutMs });
    return { kind: 'reply', data: m.data };
  } catch (e) {
    // nats.js refuses a request over the server's max_payload itself, before sending anything.
    const oversized = c.bytes.length > (bus.nc.info?.max_payload ?? Infinity);
    return oversized ? { kind: 'refused', error: errorMessage(e) } : { kind: 'no-reply', error: errorMessage(e) };
  }
}

/** Sends every case, `concurrency` at a time, in order; resolves with each case's outcome (by case id). */
export async function storm(bus: Bus, cases: readonly FuzzCase[], o: StormOptions): Promise<Map<number, Outcome>> {
  const outcomes = new Map<number, Outcome>();
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < cases.length) {
      const c = cases[next++]!;
      outcomes.set(c.id, await send(bus, c, o));
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, o.concurrency) }, worker));
  return outcomes;
}
