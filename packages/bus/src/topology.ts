/**
 * Creates or updates Triad's streams and durable consumers, idempotently, at start-up. Every actor may
 * call it; the same configuration twice is a no-op, a changed one is applied as an update.
 */
import {
  AckPolicy,
  DeliverPolicy,
  DiscardPolicy,
  JetStreamApiError,
  RetentionPolicy,
  StorageType,
  type ConsumerConfig,
  type StreamConfig,
} from '@nats-io/jetstream';
import { nanos } from '@nats-io/nats-core';
import { DEFAULT_MAX_MESSAGE_BYTES, ErrorCode, TriadError } from '@triad/protocol';
import { explainNoJetStream, type Bus } from './connection.js';
import { PUBLISH_RETRY_MS, isLeaderChange } from './publish.js';

const HOUR = 3_600_000;

export interface TopologyOptions {
  /** How long task events stay replayable (the `triad watch` history). */
  eventsMaxAgeMs?: number;
  alertsMaxAgeMs?: number;
  deadLettersMaxAgeMs?: number;
  /** The window in which a resubmitted task id is dropped by JetStream itself. */
  duplicateWindowMs?: number;
  maxMessageBytes?: number;
  /** Replicas of each stream; default TRIAD_STREAM_REPLICAS, else 1. */
  replicas?: number;
  /**
   * Submissions a client may have waiting in SUBMIT (JetStream refuses its next one until the schedulers
   * take some): default TRIAD_SUBMIT_BACKLOG_PER_CLIENT, else 100 (decisions 0022, 0024).
   */
  submitBacklogPerClient?: number;
}

/** The per-client submission backlog when nothing sets one (decision 0022; 1000 before 0024 admitted the rest into Redis). */
export const DEFAULT_SUBMIT_BACKLOG_PER_CLIENT = 100;

/**
 * Room a dead letter needs beyond the message it carries: its reason (at most DEAD_LETTER_REASON_CHARS
 * characters of up to 4 bytes each) and its other fields. Without it, the dead letter of a message near
 * the streams' limit would itself be refused, and the message lost.
 */
export const DEAD_LETTER_OVERHEAD_BYTES = 32 * 1024;

type StreamSpec = Pick<StreamConfig, 'name' | 'subjects' | 'retention' | 'max_age' | 'duplicate_window' | 'max_msg_size' | 'discard'> &
  Partial<Pick<StreamConfig, 'max_msgs_per_subject' | 'discard_new_per_subject'>>;

export function streamSpecs(bus: Bus, o: TopologyOptions = {}): StreamSpec[] {
  const { subjects: s, streams: n } = bus.names;
  const maxMsg = (o.maxMessageBytes ?? DEFAULT_MAX_MESSAGE_BYTES) + 4096;
  const dup = nanos(o.duplicateWindowMs ?? 2 * 60_000);
  const work = (name: string, subjects: string[]): StreamSpec => ({
    name,
    subjects,
    retention: RetentionPolicy.Workqueue,
    max_age: 0,
    duplicate_window: dup,
    max_msg_size: maxMsg,
    discard: DiscardPolicy.Old,
  });
  const log = (name: string, subjects: string[], maxAgeMs: number, maxMsgSize = maxMsg): StreamSpec => ({
    name,
    subjects,
    retention: RetentionPolicy.Limits,
    max_age: nanos(maxAgeMs),
    duplicate_window: nanos(Math.min(maxAgeMs, 2 * 60_000)),
    max_msg_size: maxMsgSize,
    discard: DiscardPolicy.Old,
  });
  // Fair intake: each client's subject holds at most this many waiting submissions; JetStream refuses the
  // next one (error 10077) instead of letting one client's backlog grow ahead of everyone's (decision 0022).
  const backlog = o.submitBacklogPerClient ?? submitBacklogPerClient();
  return [
    { ...work(n.submit, [s.submitAll]), discard: DiscardPolicy.New, max_msgs_per_subject: backlog, discard_new_per_subject: true },
    work(n.steps, [s.stepAll]),
    work(n.results, [s.resultAll]),
    work(n.commands, [s.command]),
    log(n.events, [s.eventAll], o.eventsMaxAgeMs ?? 24 * HOUR),
    log(n.alerts, [s.alert], o.alertsMaxAgeMs ?? 7 * 24 * HOUR),
    log(n.deadLetters, [s.deadLetterAll], o.deadLettersMaxAgeMs ?? 7 * 24 * HOUR, maxMsg + DEAD_LETTER_OVERHEAD_BYTES),
  ];
}

/** JetStream API error 10058: stream name in use with a different configuration. */
const STREAM_NAME_EXIST = 10058;
/**
 * JetStream API error 10065: the subjects overlap an existing stream's. Also what an actor gets when it
 * adds a stream while another actor's add of the same stream is still being applied (actors start
 * together): tried again, and the second try finds the stream.
 */
const SUBJECTS_OVERLAP = 10065;

/**
 * Replicas of each stream: TRIAD_STREAM_REPLICAS (default 1; 3 on a 3-node NATS cluster, decision 0015).
 * Throws INVALID_CONFIG for anything but a whole number from 1 to 5.
 */
export function streamReplicas(env: NodeJS.ProcessEnv = process.env): number {
  const raw = env['TRIAD_STREAM_REPLICAS'];
  if (raw === undefined || raw.trim() === '') return 1;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 1 || n > 5) {
    throw new TriadError(ErrorCode.InvalidConfig, `TRIAD_STREAM_REPLICAS is "${raw}": set it to the number of replicas of each stream, 1 to 5 (at most the cluster's JetStream servers; 1 for a single server)`);
  }
  return n;
}

/**
 * Waiting submissions allowed per client: TRIAD_SUBMIT_BACKLOG_PER_CLIENT (default 100). Set it alike on
 * schedulers and supervisors: both ensure the streams. Throws INVALID_CONFIG for anything but a whole
 * number from 1 to 1000000.
 */
export function submitBacklogPerClient(env: NodeJS.ProcessEnv = process.env): number {
  const raw = env['TRIAD_SUBMIT_BACKLOG_PER_CLIENT'];
  if (raw === undefined || raw.trim() === '') return DEFAULT_SUBMIT_BACKLOG_PER_CLIENT;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 1 || n > 1_000_000) {
    throw new TriadError(
      ErrorCode.InvalidConfig,
      `TRIAD_SUBMIT_BACKLOG_PER_CLIENT is "${raw}": set it to how many submissions one client may have waiting, 1 to 1000000 (default ${DEFAULT_SUBMIT_BACKLOG_PER_CLIENT}), alike on every scheduler and supervisor`,
    );
  }
  return n;
}

export async function ensureStreams(bus: Bus, o: TopologyOptions = {}): Promise<void> {
  try {
    await ensureEachStream(bus, o);
  } catch (e) {
    throw explainNoJetStream(e, bus.names.namespace) ?? e;
  }
}

async function ensureEachStream(bus: Bus, o: TopologyOptions): Promise<void> {
  const replicas = o.replicas ?? streamReplicas();
  for (const spec of streamSpecs(bus, o)) {
    const cfg: Partial<StreamConfig> & { name: string } = { ...spec, storage: StorageType.File, num_replicas: replicas };
    // Actors start together and each ensures the streams: one that exists as wanted is left alone (on a
    // NATS cluster every add or update is a round of the meta group's consensus).
    if (await existsAsWanted(bus, cfg)) continue;
    const deadline = Date.now() + PUBLISH_RETRY_MS * 3;
    for (let tries = 1; ; tries++) {
      try {
        await bus.jsm.streams.add(cfg);
        break;
      } catch (e) {
        // A meta leader change on a NATS cluster: no answer, or not in time. Tried again, bounded.
        if (bus.nc.info?.cluster && isLeaderChange(e) && Date.now() < deadline) {
          await new Promise((r) => setTimeout(r, 250 * Math.min(tries, 8)));
          continue;
        }
        if (e instanceof JetStreamApiError && e.code === STREAM_NAME_EXIST) {
          const { name, ...update } = cfg;
          delete update.storage; // storage cannot change on an existing stream
          delete update.retention;
          await bus.jsm.streams.update(name, update);
          break;
        }
        if (!(e instanceof JetStreamApiError && e.code === SUBJECTS_OVERLAP && tries < 3)) throw e;
        await new Promise((r) => setTimeout(r, 100 * tries));
      }
    }
  }
}

/** Whether the stream exists with every setting `cfg` names as asked (storage and retention cannot change). */
async function existsAsWanted(bus: Bus, cfg: Partial<StreamConfig> & { name: string }): Promise<boolean> {
  let have: StreamConfig;
  try {
    have = (await bus.jsm.streams.info(cfg.name)).config;
  } catch {
    return false; // not found (or not answerable now): the add below says which
  }
  const same = (a: unknown, b: unknown): boolean => JSON.stringify(a) === JSON.stringify(b);
  return (
    same([...(have.subjects ?? [])].sort(), [...(cfg.subjects ?? [])].sort()) &&
    have.retention === cfg.retention &&
    have.max_age === cfg.max_age &&
    have.duplicate_window === cfg.duplicate_window &&
    have.max_msg_size === cfg.max_msg_size &&
    have.discard === cfg.discard &&
    (have.max_msgs_per_subject ?? -1) === (cfg.max_msgs_per_subject ?? -1) &&
    Boolean(have.discard_new_per_subject) === Boolean(cfg.discard_new_per_subject) &&
    have.num_replicas === cfg.num_replicas
  );
}

export interface ConsumerSpec {
  stream: string;
  durable: string;
  filterSubject: string;
  /** Redelivery after this long without ack (the message's handler may extend it with working()). */
  ackWaitMs: number;
  maxAckPending?: number;
}

/** JetStream API error 10148: consumer already exists with a different configuration. */
const CONSUMER_EXISTS = 10148;

export async function ensureConsumer(bus: Bus, c: ConsumerSpec): Promise<void> {
  const cfg: Partial<ConsumerConfig> = {
    durable_name: c.durable,
    ack_policy: AckPolicy.Explicit,
    deliver_policy: DeliverPolicy.All,
    filter_subject: c.filterSubject,
    ack_wait: nanos(c.ackWaitMs),
    // Dead-lettering past the redelivery limit is ours (the consumer loop), so the server never
    // silently stops delivering a message that still sits in a work-queue stream.
    max_deliver: -1,
    max_ack_pending: c.maxAckPending ?? 10_000,
  };
  const deadline = Date.now() + PUBLISH_RETRY_MS * 3;
  for (let tries = 1; ; tries++) {
    try {
      await addOrUpdateConsumer(bus, c, cfg);
      return;
    } catch (e) {
      // A stream or meta leader change on a NATS cluster: tried again, bounded.
      if (!(bus.nc.info?.cluster && isLeaderChange(e) && Date.now() < deadline)) throw e;
      await new Promise((r) => setTimeout(r, 250 * Math.min(tries, 8)));
    }
  }
}

async function addOrUpdateConsumer(bus: Bus, c: ConsumerSpec, cfg: Partial<ConsumerConfig>): Promise<void> {
  try {
    await bus.jsm.consumers.add(c.stream, cfg);
  } catch (e) {
    if (e instanceof JetStreamApiError && (e.code === CONSUMER_EXISTS || /already exists/i.test(e.message))) {
      await bus.jsm.consumers.update(c.stream, c.durable, {
        ack_wait: cfg.ack_wait,
        max_deliver: cfg.max_deliver,
        max_ack_pending: cfg.max_ack_pending,
      });
    } else throw e;
  }
}
