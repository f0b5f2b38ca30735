/**
 * The agent host: one durable consumer per agent type on the steps stream (processes of one type share
 * the work), runs each request with runStep, and publishes the result on its agent type's subject — or
 * nothing, if the window closed. It speaks only NATS (decision 0010): the step request's JetStream
 * message is its lease, kept with `working()` while the step runs and acknowledged once the result is
 * stored.
 */
import { hostname } from 'node:os';
import type { MsgHdrs, Subscription } from '@nats-io/nats-core';
import { randomUUID } from 'node:crypto';
import { PayloadStore, deadLetter, ensureConsumer, explainNoJetStream, offloadEncoded, resolveRefs, startConsumer, type Bus, type Disposition, type RunningConsumer } from '@triad/bus';
import { nuid } from '@nats-io/nats-core';
import { contextFromHeaders, intercept, traceHeaders, type HeaderReader, type Next } from '@triad/telemetry';
import {
  ErrorCode,
  ProbeRequestSchema,
  StepRequestSchema,
  TriadError,
  decode,
  decodeStepRequests,
  encode,
  encodeMap,
  RawMsgpack,
  errorMessage,
  isTriadError,
  outputObjectPrefix,
  type ProbeReply,
  type ProbeRequest,
  type StepRequest,
  type StepResult,
} from '@triad/protocol';
import { silentLogger, type Logger } from '@triad/telemetry';
import { ConsecutiveBreaker, bulkhead, circuitBreaker, handleWhen, type BulkheadPolicy, type CircuitBreakerPolicy } from 'cockatiel';
import { DEFAULT_AGENT_CONCURRENCY, type AgentDefinition } from './define.js';
import { isPermanent, isThrottled } from './errors.js';
import { ResultSender } from './result-sender.js';
import { runStep, type StepOutcome } from './run-step.js';
import { resolveAgentHostSettings, resolveBreakerSettings, type AgentHostSettings, type ResolvedAgentHostSettings } from './options.js';
import { agentMetrics, countAttempt, traceAttempt, type AgentMetrics, type AttemptInput } from './telemetry.js';

/** An attempt's outcome, with the trace headers (its span) its result is sent with. */
type Attempted = StepOutcome & { trace: Record<string, string> };

export interface AgentHostOptions extends AgentHostSettings {
  bus: Bus;
  agents: readonly AgentDefinition[];
  id?: string;
  logger?: Logger;
}

/**
 * Results queued for publishing beyond which a finished step keeps its slot until its result is stored:
 * when NATS is slow, the agent stops taking new steps instead of piling results up in memory.
 */
const MAX_RESULT_BACKLOG = 1_024;
/** Step request batches one process works on at once per agent type (decision 0023). */
const BATCHES_AT_ONCE = 2;

/**
 * An agent type's circuit breaker: opened by `threshold` retryable failures in a row. A permanent failure
 * says nothing about the service's health, nor does a throttle — a service that says "slow down" is not
 * unhealthy (decision 0020 §5.2): neither counts.
 */
export function stepBreaker(halfOpenAfterMs: number, threshold: number): CircuitBreakerPolicy {
  return circuitBreaker(handleWhen((e) => !isPermanent(e) && !isThrottled(e)), { halfOpenAfter: halfOpenAfterMs, breaker: new ConsecutiveBreaker(threshold) });
}

export class AgentHost {
  readonly id: string;
  /** The settings, every default applied (options.ts). */
  readonly settings: ResolvedAgentHostSettings;
  private readonly breakers = new Map<string, { policy: CircuitBreakerPolicy; halfOpenAfterMs: number }>();
  private readonly log: Logger;
  private consumers: RunningConsumer[] = [];
  private stopped = false;
  /** Resolves once every agent type's consumer is attached (see start). */
  attached: Promise<void> = Promise.resolve();
  private isAttached = false;
  private readonly agents: Map<string, AgentDefinition>;
  /** One sender per agent type: each publishes on its own result subject. */
  private readonly results = new Map<string, ResultSender>();
  /** Each agent type's counters, bound to their labels once. */
  private readonly metrics = new Map<string, AgentMetrics>();
  /** Each agent type's slots (see slotsOf). */
  private readonly slots = new Map<string, BulkheadPolicy>();
  /** One step attempt inside its interceptors (tracing, metrics). */
  private readonly runAttempt: Next<AttemptInput, Attempted>;
  /** Large payloads (decision 0021 §4): inputs and needs resolved before the handler, big outputs stored. */
  private readonly payloads: PayloadStore;
  /** The attempts this host runs now, by holdingKey: what it answers a probe with (decision 0021 §3.3). */
  private readonly holding = new Map<string, Omit<ProbeReply, 'agentId' | 'taskId' | 'step' | 'kind' | 'attempt' | 'item'>>();
  private probes: Subscription[] = [];

  constructor(private readonly o: AgentHostOptions) {
    this.settings = resolveAgentHostSettings(o);
    this.id = o.id ?? `agent-${hostname()}-${process.pid}-${randomUUID().slice(0, 4)}`;
    this.log = o.logger ?? silentLogger;
    this.payloads = new PayloadStore(o.bus, { maxObjectBytes: this.settings.maxObjectBytes });
    this.agents = new Map(o.agents.map((a) => [a.name, a]));
    this.runAttempt = intercept((i) => this.attempt(i), traceAttempt(o.bus.names.namespace, this.id), countAttempt((agent) => this.metricsOf(agent)));
    for (const a of o.agents) {
      this.results.set(a.name, new ResultSender(o.bus, o.bus.names.subjects.result(a.name)));
      const b = resolveBreakerSettings(a.name, a.breaker);
      const policy = stepBreaker(b.halfOpenAfterMs, b.threshold);
      policy.onBreak(() => this.log.warn({ agent: a.name, halfOpenAfterMs: b.halfOpenAfterMs }, 'circuit opened: steps are parked until it half-opens'));
      policy.onReset(() => this.log.info({ agent: a.name }, 'circuit closed'));
      this.breakers.set(a.name, { policy, halfOpenAfterMs: b.halfOpenAfterMs });
    }
  }

  /**
   * Starts serving. The consumers attach in the background (`attached`): an agent may start before any
   * scheduler, and waits for one to create the streams.
   */
  start(): Promise<void> {
    this.attached = this.attach();
    this.attached.catch((e: unknown) => this.log.error({ err: errorMessage(e) }, 'agent host could not attach to the steps stream'));
    return Promise.resolve();
  }

  private async attach(): Promise<void> {
    const { bus } = this.o;
    const n = bus.names;
    const { ackWaitMs } = this.settings;
    await this.streamsReady();
    if (this.stopped) return;
    for (const agent of this.agents.values()) {
      const durable = n.consumers.agent(agent.name);
      const concurrency = agent.concurrency ?? DEFAULT_AGENT_CONCURRENCY;
      await ensureConsumer(bus, { stream: n.streams.steps, durable, filterSubject: n.subjects.step(agent.name), ackWaitMs });
      this.consumers.push(
        startConsumer(bus, { stream: n.streams.steps, durable, source: `step.${agent.name}`, concurrency, prefetch: concurrency, logger: this.log }, (d) =>
          this.onRequest(agent, d.data, d.deliveryCount, d.working, d.ackNow, ackWaitMs, d.headers),
        ),
      );
      if (!this.settings.takeBatches) continue;
      // Pulling from the batch durable is the announcement (decision 0023): schedulers send this type
      // batches while it has pulls waiting. Two batches at a time per process; items take the slots.
      const batches = n.consumers.agentBatch(agent.name);
      await ensureConsumer(bus, { stream: n.streams.steps, durable: batches, filterSubject: n.subjects.stepBatch(agent.name), ackWaitMs });
      this.consumers.push(
        startConsumer(bus, { stream: n.streams.steps, durable: batches, source: `step.${agent.name}`, concurrency: BATCHES_AT_ONCE, prefetch: BATCHES_AT_ONCE, logger: this.log }, (d) =>
          this.onBatch(agent, d.data, d.subject, d.deliveryCount, d.working, d.ackNow, ackWaitMs, d.headers),
        ),
      );
    }
    await Promise.all(this.consumers.map((c) => c.ready));
    for (const agent of this.agents.values()) this.probes.push(this.answerProbes(agent.name));
    this.isAttached = true;
    this.log.info({ agentId: this.id, agents: [...this.agents.keys()] }, 'agent host attached: serving steps');
  }

  /** Every agent type's consumer is attached: the host is serving steps (its health). */
  serving(): boolean {
    return this.isAttached && !this.stopped;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    for (const p of this.probes) p.unsubscribe();
    this.probes = [];
    await Promise.all(this.consumers.map((c) => c.stop()));
    await Promise.all([...this.results.values()].map((r) => r.drain()));
  }

  /**
   * Waits for the STEPS stream: the streams are the schedulers' to create (protocol §3, decision 0010),
   * so an agent never tries — under least privilege that try would be a permission violation the server
   * logs (issue #21). It asks only for the STEPS stream's info, which every agent identity may.
   */
  private async streamsReady(): Promise<void> {
    const { bus } = this.o;
    const stream = bus.names.streams.steps;
    // At most a second between looks: a scheduler that starts later is noticed soon after.
    for (let delay = 250, said = false; !this.stopped; delay = Math.min(delay * 2, 1_000)) {
      try {
        await bus.jsm.streams.info(stream);
        return;
      } catch (e) {
        if (!/not found/i.test(errorMessage(e))) throw explainNoJetStream(e, bus.names.namespace) ?? e;
      }
      if (!said) this.log.warn({ stream }, 'waiting for the steps stream: start a scheduler in this namespace (it creates the streams)');
      said = true;
      await new Promise((r) => setTimeout(r, delay));
    }
  }

  /**
   * Answers probes of one agent type (decision 0021 §3.3): every instance receives each probe (no queue
   * group); only the one holding the attempt answers, on the probe's reply subject — which must be under
   * `triad.<ns>.probed.<its type>.` (the only replies its permissions allow), else it stays silent.
   */
  private answerProbes(agent: string): Subscription {
    const { bus } = this.o;
    const replyPrefix = bus.names.subjects.probedPrefix(agent);
    return bus.nc.subscribe(bus.names.subjects.probe(agent), {
      callback: (err, msg) => {
        if (err || !msg.reply || !msg.reply.startsWith(replyPrefix)) return;
        const d = decode(msg.data, ProbeRequestSchema, `probe for agent ${agent}`);
        if (!d.ok) return;
        const p = d.value;
        const held = this.holding.get(holdingKey(agent, p));
        if (!held) return;
        try {
          bus.nc.publish(msg.reply, encode({ ...p, agentId: this.id, ...held } satisfies ProbeReply));
        } catch (e) {
          this.log.debug({ err: errorMessage(e) }, 'probe answer not sent');
        }
      },
    });
  }

  /** A single request (subject `step.<agent>`): the message is the step's lease. */
  private async onRequest(
    agent: AgentDefinition,
    data: Uint8Array,
    deliveryCount: number,
    working: () => void,
    ackNow: () => void,
    ackWaitMs: number,
    headers?: HeaderReader,
  ): Promise<Disposition> {
    const d = decode(data, StepRequestSchema, `step request for agent ${agent.name}`);
    if (!d.ok) return { deadLetter: d.error.message };
    const req = d.value;
    if (req.agent !== agent.name) return { deadLetter: `step request names agent "${req.agent}" but arrived on ${agent.name}'s subject` };
    // The message is the step's lease: keep it while the step waits for a slot and runs, so JetStream
    // gives it to no one else.
    const keepAlive = setInterval(working, Math.max(100, Math.floor(ackWaitMs / 3)));
    let settled: 'ack' | 'defer';
    try {
      settled = await this.runRequest(agent, req, deliveryCount, contextFromHeaders(headers), () => {
        clearInterval(keepAlive);
        ackNow();
      });
    } catch (e) {
      clearInterval(keepAlive);
      throw e;
    }
    if (settled === 'ack') clearInterval(keepAlive);
    return settled;
  }

  /**
   * A batch of requests (subject `step.b~<agent>`, decision 0023): each item is validated, run, reported
   * or dead-lettered on its own; the message — the lease of all of them — is kept alive until every item
   * is settled, and then acknowledged. A bad item never costs its neighbours.
   */
  private async onBatch(
    agent: AgentDefinition,
    data: Uint8Array,
    subject: string,
    deliveryCount: number,
    working: () => void,
    ackNow: () => void,
    ackWaitMs: number,
    headers?: MsgHdrs,
  ): Promise<Disposition> {
    const d = decodeStepRequests(data);
    // Nothing in it can be read: dead-lettered whole, like an unreadable single request.
    if (!d.ok) return { deadLetter: d.error.message };
    const items = d.value;
    const keepAlive = setInterval(working, Math.max(100, Math.floor(ackWaitMs / 3)));
    let left = items.length;
    const settledOne = (): void => {
      if (--left > 0) return;
      clearInterval(keepAlive);
      ackNow();
    };
    const source = `step.${agent.name}`;
    await Promise.all(
      items.map(async (it, i) => {
        let once = false;
        const settle = (): void => {
          if (once) return;
          once = true;
          settledOne();
        };
        try {
          const problem = !it.ok ? it.error.message : it.value.agent !== agent.name ? `step request ${i + 1} of ${items.length} in a batch names agent "${it.value.agent}" but arrived on ${agent.name}'s batch subject` : undefined;
          if (problem !== undefined || !it.ok) {
            const reason = problem ?? 'invalid step request';
            // The item alone, with its own bytes: its neighbours run.
            if (!(await deadLetter(this.o.bus, source, reason, it.bytes, deliveryCount, { subject: this.o.bus.names.subjects.step(agent.name), headers }))) {
              this.log.error({ agent: agent.name, item: i + 1, reason }, 'dead letter of a step request in a batch not stored: the request is dropped (its step, if real, is retried after its complete-by)');
            }
            settle();
            return;
          }
          const parent = it.traceparent ? contextFromHeaders({ get: (k) => (k === 'traceparent' ? (it.traceparent ?? '') : '') }) : contextFromHeaders(headers);
          if ((await this.runRequest(agent, it.value, deliveryCount, parent, settle)) === 'ack') settle();
        } catch (e) {
          // Not redelivered: that would run its neighbours again. Its step is retried after its complete-by.
          this.log.error({ agent: agent.name, item: i + 1, err: errorMessage(e) }, 'step request in a batch failed unexpectedly: the supervisor retries it after its complete-by');
          settle();
        }
      }),
    );
    return 'defer';
  }

  /**
   * Runs one valid request in a slot of its agent type: 'ack' when it is done with nothing to send
   * (late, expired); 'defer' when its result is queued — `stored` is called once
   * the result is stored (or could not be).
   */
  private async runRequest(agent: AgentDefinition, req: StepRequest, deliveryCount: number, parent: ReturnType<typeof contextFromHeaders>, stored: () => void): Promise<'ack' | 'defer'> {
    const margin = this.settings.safetyMarginMs;
    const m = this.metricsOf(agent.name);
    if (req.completeBy - margin <= Date.now()) {
      m.droppedOnArrival.inc();
      this.log.debug({ taskId: req.taskId, step: req.step, attempt: req.attempt }, 'request arrived past completeBy: dropped');
      return 'ack';
    }
    if (deliveryCount > 1) {
      // Another agent took it and stopped signalling (died, or paused): run the same attempt again; its
      // effect is applied once by the idempotency key, and the scheduler applies one result per attempt.
      m.redelivered.inc();
      this.log.info({ taskId: req.taskId, step: req.step, attempt: req.attempt, deliveryCount }, 'step request delivered again: running it');
    }
    // Held from now (probes, decision 0021 §3.3): waiting for a slot counts as try 0.
    const held = holdingKey(agent.name, { ...req, item: req.item?.index });
    this.holding.set(held, { since: Date.now(), try: 0, state: 'calling' });
    let outcome: Attempted;
    try {
      // Items, not messages, take the agent type's slots (decision 0023).
      outcome = await this.slotsOf(agent).execute(() => this.runAttempt({ agent, req, deliveryCount, parent }));
    } catch (e) {
      this.holding.delete(held);
      throw e;
    }
    if (outcome.kind === 'expired') {
      this.holding.delete(held);
      this.log.warn({ taskId: req.taskId, step: req.step, attempt: req.attempt, tries: outcome.tries }, 'complete-by reached: stopped, nothing sent back');
      return 'ack';
    }
    // The lease is held until the result is stored (a crash before that hands the step to another agent);
    // the slot is free once the result is queued, unless the queue is long.
    const sender = this.results.get(agent.name);
    // The result carries the attempt's span as its `traceparent` (taken now: results are sent in batches).
    const done = this.report(req, outcome, outcome.trace)
      .catch((e: unknown) =>
        this.log.warn({ taskId: req.taskId, step: req.step, attempt: req.attempt, err: errorMessage(e) }, 'result not stored: the supervisor retries the step after its complete-by'),
      )
      .finally(() => {
        this.holding.delete(held);
        stored();
      });
    const h = this.holding.get(held);
    if (h) this.holding.set(held, { since: h.since, try: h.try, state: 'sending' });
    if ((sender?.backlog ?? 0) > MAX_RESULT_BACKLOG) await done;
    return 'defer';
  }

  /** An agent type's slots: its `concurrency`, shared by single requests and batch items. */
  private slotsOf(agent: AgentDefinition): BulkheadPolicy {
    let b = this.slots.get(agent.name);
    if (!b) this.slots.set(agent.name, (b = bulkhead(agent.concurrency ?? DEFAULT_AGENT_CONCURRENCY, Number.POSITIVE_INFINITY)));
    return b;
  }

  private metricsOf(agent: string): AgentMetrics {
    let m = this.metrics.get(agent);
    if (!m) this.metrics.set(agent, (m = agentMetrics(this.o.bus.names.namespace, agent)));
    return m;
  }

  /** Runs the step inside its attempt's span; the trace headers its result carries are taken there. */
  private async attempt({ agent, req: sent }: AttemptInput): Promise<Attempted> {
    const breaker = this.breakers.get(agent.name);
    const margin = this.settings.safetyMarginMs;
    // References in the input, the needs and a fan-out element's value are resolved first, so handlers
    // see plain values; the download counts against complete-by (decision 0021 §4.4).
    let req: StepRequest;
    try {
      req = await this.resolveRequest(sent);
    } catch (e) {
      const retryable = isTriadError(e) && e.code === ErrorCode.Unavailable;
      return { kind: 'failed', message: `cannot read the step's payload: ${errorMessage(e)}`, name: 'PayloadUnreadable', retryable, tries: 0, effect: 'none', trace: traceHeaders() };
    }
    const key = holdingKey(agent.name, { ...req, item: req.item?.index });
    const onTry = (t: number, state: 'calling' | 'backing_off', nextTryAt?: number): void => {
      const h = this.holding.get(key);
      if (h) this.holding.set(key, { since: h.since, try: t, state, ...(nextTryAt !== undefined ? { nextTryAt } : {}) });
    };
    const outcome = await runStep(req, agent, breaker ? { safetyMarginMs: margin, breaker, onTry } : { safetyMarginMs: margin, onTry });
    return { ...outcome, trace: traceHeaders() };
  }

  private async resolveRequest(req: StepRequest): Promise<StepRequest> {
    const download = (ref: Parameters<PayloadStore['read']>[0]): Promise<Uint8Array> => this.payloads.read(ref);
    const input = await resolveRefs(req.input, download);
    const needs = (await resolveRefs(req.needs, download)) as StepRequest['needs'];
    const item = req.item ? { ...req.item, value: await resolveRefs(req.item.value, download) } : undefined;
    if (input === req.input && needs === req.needs && item?.value === req.item?.value) return req;
    return { ...req, input, needs, ...(item ? { item } : {}) };
  }

  /**
   * An output above the inline threshold, stored in the task's client's bucket under this attempt's name
   * (decision 0021 §4.3); the value to send. Throws a TriadError: INVALID_MESSAGE for a value holding the
   * reserved key or above TRIAD_MAX_OBJECT_BYTES, UNAVAILABLE when the store refused the upload.
   */
  private async offloadOutput(req: Pick<StepRequest, 'taskId' | 'step' | 'kind' | 'attempt' | 'item' | 'bucket'>, output: unknown): Promise<Uint8Array | undefined> {
    return offloadEncoded(output, 'output', this.settings.inlineMaxBytes, async (bytes) => {
      if (!req.bucket) throw new TriadError(ErrorCode.InvalidMessage, `the output is ${bytes.length} bytes, above the inline limit of ${this.settings.inlineMaxBytes}, and the step request names no bucket: upgrade the schedulers (large payloads, decision 0021)`);
      return this.payloads.put(req.bucket, `${outputObjectPrefix(req.taskId, req.step, req.kind, req.attempt, req.item?.index)}${nuid.next()}`, bytes);
    });
  }

  private async report(req: Pick<StepRequest, 'taskId' | 'step' | 'agent' | 'kind' | 'attempt' | 'item' | 'bucket'>, outcome: Exclude<StepOutcome, { kind: 'expired' }>, trace: Record<string, string>): Promise<void> {
    // A fan-out element's result echoes its index (decision 0019 §8.3).
    const item = req.item ? { item: req.item.index } : {};
    const base = { taskId: req.taskId, step: req.step, kind: req.kind, attempt: req.attempt, agentId: this.id, finishedAt: Date.now(), tries: outcome.tries, ...item };
    let result: StepResult;
    if (outcome.kind === 'ok') {
      try {
        // The output encoded once (to measure it), then embedded as those bytes (encodeMap below).
        const output = await this.offloadOutput(req, outcome.output);
        result = { ...base, ok: true, ...(output ? { output: new RawMsgpack(output) } : {}) };
      } catch (e) {
        // The handler ran: its effect is unknown. A store that refused is worth another attempt; an
        // output Triad cannot carry is not.
        const retryable = isTriadError(e) && e.code === ErrorCode.Unavailable;
        result = { ...base, ok: false, error: { message: errorMessage(e).slice(0, 4000), retryable, effect: 'unknown' } };
      }
    }
    else if (outcome.kind === 'circuit_open') {
      result = { ...base, ok: false, error: { message: `the circuit breaker of agent "${req.agent}" is open; the step was not attempted`, retryable: true, circuitOpen: true, retryAfterMs: outcome.retryAfterMs, effect: 'none' } };
    } else if (outcome.kind === 'throttled') {
      result = { ...base, ok: false, error: { message: outcome.message.slice(0, 4000), retryable: true, throttled: true, retryAfterMs: outcome.retryAfterMs, effect: outcome.effect, name: 'ThrottledError' } };
    } else {
      result = { ...base, ok: false, error: { message: outcome.message.slice(0, 4000), retryable: outcome.retryable, effect: outcome.effect, ...(outcome.name ? { name: outcome.name } : {}) } };
    }
    let bytes: Uint8Array;
    try {
      bytes = encodeMap(Object.entries(result));
    } catch (e) {
      // An output too large to send is the handler's bug: report it as a permanent failure.
      // The handler ran and returned, so its effect is unknown to Triad (it may well have happened).
      result = { ...base, ok: false, error: { message: isTriadError(e) ? e.message : `output cannot be encoded: ${errorMessage(e)}`, retryable: false, effect: 'unknown' } };
      bytes = encode(result);
    }
    const sender = this.results.get(req.agent);
    if (!sender) throw new Error(`no result sender for agent ${req.agent}`);
    await sender.send(bytes, resultMessageId(req), trace);
  }
}

/** The key of an attempt in the host's `holding` map (and of a probe for it). */
function holdingKey(agent: string, a: Pick<ProbeRequest, 'taskId' | 'step' | 'kind' | 'attempt'> & { item?: number | undefined }): string {
  return `${agent}|${a.taskId}|${a.step}|${a.kind}|${a.attempt}|${a.item ?? ''}`;
}

/**
 * A result's JetStream message id: one per step (element) attempt, so a result sent twice is stored once,
 * and the results of a fan-out step's elements — one attempt number each — are never taken for repeats
 * of one another (`<step>#<index>`, protocol §8).
 */
export function resultMessageId(req: Pick<StepRequest, 'taskId' | 'step' | 'kind' | 'attempt' | 'item'>): string {
  const step = req.item ? `${req.step}#${req.item.index}` : req.step;
  return `${req.taskId}:${step}:${req.kind}:${req.attempt}:result`;
}
