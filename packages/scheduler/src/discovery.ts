/**
 * The schedulers' API as a NATS service: each scheduler answers the service framework's discovery
 * subjects (`$SRV.PING`, `$SRV.INFO`, `$SRV.STATS`, each also `.<name>` and `.<name>.<id>`) with the
 * framework's JSON, so `nats micro ls/info/stats` list it. Served here rather than by @nats-io/services,
 * whose only release (3.0.0-25) pins a pre-release nats-core that our connection cannot share (decision
 * 0012).
 */
import type { Msg, NatsConnection, Subscription } from '@nats-io/nats-core';
import { errorMessage } from '@triad/protocol';
import { type Logger } from '@triad/telemetry';
import { discoveryReplyAllowed } from './replies.js';

/** Per-endpoint counters, as the service framework's stats report them. */
export interface EndpointStats {
  requests: number;
  errors: number;
  lastError: string;
  /** Total handling time, ns. */
  processingNs: number;
}

export interface DiscoveryOptions {
  nc: NatsConnection;
  /** The service's name: `triad-<namespace>` (letters, digits, `-`, `_`). */
  name: string;
  /** This instance (the scheduler's id). */
  id: string;
  version: string;
  description: string;
  metadata: Record<string, string>;
  queueGroup: string;
  /** Each endpoint's name (`endpointName`) and subject, which may hold a wildcard (`api.client.*.task.get`). */
  endpoints: readonly { name: string; subject: string }[];
  stats: (name: string) => EndpointStats;
  log: Logger;
  /** A request whose reply subject is no inbox (decision 0022): not answered; the caller counts it. */
  refused: (msg: Msg, reason: string) => void;
}

const VERBS = ['PING', 'INFO', 'STATS'] as const;
type Verb = (typeof VERBS)[number];

/**
 * An endpoint's name in the framework's alphabet: `task.get` → `task_get`, and its client-scoped form
 * (decision 0017) → `client_task_get`.
 */
export function endpointName(op: string, scoped = false): string {
  return `${scoped ? 'client_' : ''}${op.replace(/\./g, '_')}`;
}

export class Discovery {
  private subs: Subscription[] = [];
  private readonly started = new Date().toISOString();

  constructor(private readonly o: DiscoveryOptions) {}

  start(): void {
    for (const verb of VERBS) {
      for (const subject of [`$SRV.${verb}`, `$SRV.${verb}.${this.o.name}`, `$SRV.${verb}.${this.o.name}.${this.o.id}`]) {
        this.subs.push(this.o.nc.subscribe(subject, { callback: (err, msg) => (err ? this.o.log.warn({ err: errorMessage(err) }, 'discovery subscription error') : this.answer(verb, msg)) }));
      }
    }
  }

  async stop(): Promise<void> {
    await Promise.all(this.subs.map((s) => s.drain().catch(() => undefined)));
  }

  private answer(verb: Verb, msg: Msg): void {
    if (!msg.reply) return;
    if (!discoveryReplyAllowed(msg.reply)) {
      this.o.refused(msg, `reply subject "${msg.reply}" of ${msg.subject} is no inbox (_INBOX.…): not answered`);
      return;
    }
    try {
      msg.respond(new TextEncoder().encode(JSON.stringify(this.body(verb))));
    } catch (e) {
      this.o.log.warn({ err: errorMessage(e) }, 'discovery reply failed');
    }
  }

  /** The framework's response bodies (io.nats.micro.v1.*). */
  body(verb: Verb): Record<string, unknown> {
    const base = { name: this.o.name, id: this.o.id, version: this.o.version, metadata: this.o.metadata };
    if (verb === 'PING') return { type: 'io.nats.micro.v1.ping_response', ...base };
    if (verb === 'INFO') {
      return {
        type: 'io.nats.micro.v1.info_response',
        ...base,
        description: this.o.description,
        endpoints: this.o.endpoints.map((e) => ({ name: e.name, subject: e.subject, queue_group: this.o.queueGroup, metadata: null })),
      };
    }
    return {
      type: 'io.nats.micro.v1.stats_response',
      ...base,
      started: this.started,
      endpoints: this.o.endpoints.map((e) => {
        const s = this.o.stats(e.name);
        return {
          name: e.name,
          subject: e.subject,
          queue_group: this.o.queueGroup,
          num_requests: s.requests,
          num_errors: s.errors,
          last_error: s.lastError,
          processing_time: s.processingNs,
          average_processing_time: s.requests > 0 ? Math.round(s.processingNs / s.requests) : 0,
          data: null,
        };
      }),
    };
  }
}
