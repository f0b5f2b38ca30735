/**
 * The agent host: one durable consumer per agent type on the steps stream (processes of one type share
 * the work), runs each request with runStep, and publishes the result — or nothing, if the window closed.
 */
import { hostname } from 'node:os';
import { randomUUID } from 'node:crypto';
import { ensureConsumer, ensureStreams, startConsumer, type Bus, type Disposition, type RunningConsumer } from '@triad/bus';
import { StepRequestSchema, decode, encode, errorMessage, isTriadError, silentLogger, type Logger, type StepRequest, type StepResult } from '@triad/protocol';
import { ConsecutiveBreaker, circuitBreaker, handleWhen, type CircuitBreakerPolicy } from 'cockatiel';
import type { Lease, Leases, TaskStore } from '@triad/store';
import type { AgentDefinition } from './define.js';
import { isPermanent } from './errors.js';
import { ResultSender } from './result-sender.js';
import { runStep, type StepOutcome } from './run-step.js';

export interface AgentHostOptions {
  bus: Bus;
  /** The state store, for the step leases (Redlock) and the fenced claim that records lockedBy. */
  state: { tasks: TaskStore; leases: Leases };
  /** The longest a step lease is taken or extended for at once (never past completeBy). */
  stepLeaseMs?: number;
  agents: readonly AgentDefinition[];
  id?: string;
  logger?: Logger;
  /** Subtracted from completeBy for clock skew between the scheduler's and this machine's clocks. */
  safetyMarginMs?: number;
}

export interface AgentMetrics {
  started: number;
  succeeded: number;
  failed: number;
  /** Requests whose window closed while running: nothing was sent back. */
  expired: number;
  /** Requests that arrived already past completeBy: dropped on receipt. */
  droppedOnArrival: number;
  /** Steps refused because the agent's circuit breaker was open. */
  circuitOpen: number;
  /** Deliveries dropped because another instance holds the step's lease (a duplicate delivery). */
  duplicates: number;
  /** Requests dropped because the step had moved on (a superseded attempt). */
  staleRequests: number;
  /** Steps aborted because their lease could not be extended. */
  leaseLost: number;
}

const DEFAULT_BREAKER = { threshold: 5, halfOpenAfterMs: 5_000 };
/**
 * Results queued for publishing beyond which a finished step keeps its slot until its result is stored:
 * when NATS is slow, the agent stops taking new steps instead of piling results up in memory.
 */
const MAX_RESULT_BACKLOG = 1_024;

export class AgentHost {
  readonly id: string;
  readonly metrics: AgentMetrics = { started: 0, succeeded: 0, failed: 0, expired: 0, droppedOnArrival: 0, circuitOpen: 0, duplicates: 0, staleRequests: 0, leaseLost: 0 };
  private readonly breakers = new Map<string, { policy: CircuitBreakerPolicy; halfOpenAfterMs: number }>();
  private readonly log: Logger;
  private consumers: RunningConsumer[] = [];
  private readonly agents: Map<string, AgentDefinition>;
  private readonly results: ResultSender;

  constructor(private readonly o: AgentHostOptions) {
    this.id = o.id ?? `agent-${hostname()}-${process.pid}-${randomUUID().slice(0, 4)}`;
    this.log = o.logger ?? silentLogger;
    this.agents = new Map(o.agents.map((a) => [a.name, a]));
    this.results = new ResultSender(o.bus);
    for (const a of o.agents) {
      const b = { ...DEFAULT_BREAKER, ...a.breaker };
      // Only retryable failures open the breaker: a permanent one says nothing about the service's health.
      const policy = circuitBreaker(handleWhen((e) => !isPermanent(e)), { halfOpenAfter: b.halfOpenAfterMs, breaker: new ConsecutiveBreaker(b.threshold) });
      policy.onBreak(() => this.log.warn({ agent: a.name, halfOpenAfterMs: b.halfOpenAfterMs }, 'circuit opened: steps are parked until it half-opens'));
      policy.onReset(() => this.log.info({ agent: a.name }, 'circuit closed'));
      this.breakers.set(a.name, { policy, halfOpenAfterMs: b.halfOpenAfterMs });
    }
  }

  async start(): Promise<void> {
    const { bus } = this.o;
    const n = bus.names;
    await ensureStreams(bus);
    for (const agent of this.agents.values()) {
      const durable = n.consumers.agent(agent.name);
      await ensureConsumer(bus, { stream: n.streams.steps, durable, filterSubject: n.subjects.step(agent.name), ackWaitMs: 30_000 });
      this.consumers.push(
        startConsumer(bus, { stream: n.streams.steps, durable, source: `step.${agent.name}`, concurrency: agent.concurrency ?? 32, prefetch: agent.concurrency ?? 32, logger: this.log }, (d) =>
          this.onRequest(agent, d.data, d.ackNow),
        ),
      );
    }
    await Promise.all(this.consumers.map((c) => c.ready));
    this.log.info({ agentId: this.id, agents: [...this.agents.keys()] }, 'agent host started');
  }

  async stop(): Promise<void> {
    await Promise.all(this.consumers.map((c) => c.stop()));
    await this.results.drain();
  }

  private async onRequest(agent: AgentDefinition, data: Uint8Array, ackNow: () => void): Promise<Disposition> {
    const d = decode(data, StepRequestSchema, `step request for agent ${agent.name}`);
    if (!d.ok) return { deadLetter: d.error.message };
    const req = d.value;
    if (req.agent !== agent.name) return { deadLetter: `step request names agent "${req.agent}" but arrived on ${agent.name}'s subject` };
    const margin = this.o.safetyMarginMs ?? 50;
    if (req.completeBy - margin <= Date.now()) {
      this.metrics.droppedOnArrival++;
      this.log.debug({ taskId: req.taskId, step: req.step, attempt: req.attempt }, 'request arrived past completeBy: dropped');
      return 'ack';
    }
    // From here the step is ours; if this process dies, the supervisor retries it after completeBy.
    ackNow();
    const held = await this.takeStep(req, margin);
    if (!held) return 'ack';
    this.metrics.started++;
    const breaker = this.breakers.get(agent.name);
    let outcome: StepOutcome;
    try {
      outcome = await runStep(req, agent, { safetyMarginMs: margin, signal: held.lost, ...(breaker ? { breaker } : {}) });
    } finally {
      held.stop();
    }
    if (outcome.kind === 'expired') {
      this.metrics.expired++;
      this.log.warn({ taskId: req.taskId, step: req.step, attempt: req.attempt, tries: outcome.tries }, 'complete-by reached: stopped, nothing sent back');
      void held.release();
      return 'ack';
    }
    // No release: applying this result deletes the step lease (and if the result is lost, the lease
    // lapses by completeBy, before any retry of the step can start). The slot is free once the result
    // is queued for publishing, unless the queue is long.
    const stored = this.report(req, outcome).catch((e: unknown) =>
      this.log.warn({ taskId: req.taskId, step: req.step, attempt: req.attempt, err: errorMessage(e) }, 'result not stored: the supervisor retries the step after its complete-by'),
    );
    if (this.results.backlog > MAX_RESULT_BACKLOG) await stored;
    return 'ack';
  }

  /**
   * Claims the step: `claimStep` takes the step's lease and records this instance as the holder in one
   * atomic call, fenced by the attempt (another instance holding the lease means this delivery is a
   * duplicate). Keeps the lease extended, never past completeBy. Once the result is applied, the
   * scheduler's transition deletes the lease, so only a run that sends no result releases it here.
   */
  private async takeStep(req: StepRequest, margin: number): Promise<{ lost: AbortSignal; stop(): void; release(): Promise<void> } | undefined> {
    const { tasks, leases } = this.o.state;
    const maxMs = this.o.stepLeaseMs ?? 10_000;
    const leaseFor = (): number => Math.min(maxMs, req.completeBy - Date.now());
    const takenAt = Date.now();
    const claimed = leases.step(req.taskId, req.step, req.kind, leaseFor());
    const claim = await tasks.claimStep({ lease: claimed, taskId: req.taskId, step: req.step, kind: req.kind, attempt: req.attempt, agentId: this.id });
    if (!claim.claimed) {
      if (claim.busy) {
        this.metrics.duplicates++;
        this.log.info({ taskId: req.taskId, step: req.step, attempt: req.attempt }, 'another instance holds this step: duplicate delivery dropped');
      } else {
        this.metrics.staleRequests++;
        this.log.info({ taskId: req.taskId, step: req.step, attempt: req.attempt, reason: claim.reason }, 'request for a step that moved on: dropped');
      }
      return undefined;
    }
    let lease: Lease = leases.held(claimed, takenAt);
    let stopped = false;
    const lost = new AbortController();
    const extendEvery = Math.max(50, Math.floor(leaseFor() / 3));
    const timer = setInterval(() => {
      const ms = leaseFor() - margin;
      if (ms <= 0) return; // the window closes before the lease would matter: runStep stops there
      lease.extend(ms).then(
        (l) => (lease = l),
        (e: unknown) => {
          if (stopped) return; // the run ended meanwhile (and its result may already have freed the lease)
          this.metrics.leaseLost++;
          this.log.warn({ taskId: req.taskId, step: req.step, err: errorMessage(e) }, 'step lease lost: stopping, sending nothing');
          lost.abort(new Error('step lease lost'));
        },
      );
    }, extendEvery);
    return {
      lost: lost.signal,
      stop: () => {
        stopped = true;
        clearInterval(timer);
      },
      release: () => lease.release(),
    };
  }

  private async report(req: Pick<StepRequest, 'taskId' | 'step' | 'agent' | 'kind' | 'attempt'>, outcome: Exclude<StepOutcome, { kind: 'expired' }>): Promise<void> {
    const base = { taskId: req.taskId, step: req.step, kind: req.kind, attempt: req.attempt, agentId: this.id, finishedAt: Date.now(), tries: outcome.tries };
    let result: StepResult;
    if (outcome.kind === 'ok') result = { ...base, ok: true, output: outcome.output };
    else if (outcome.kind === 'circuit_open') {
      this.metrics.circuitOpen++;
      result = { ...base, ok: false, error: { message: `the circuit breaker of agent "${req.agent}" is open; the step was not attempted`, retryable: true, circuitOpen: true, retryAfterMs: outcome.retryAfterMs, effect: 'none' } };
    } else {
      result = { ...base, ok: false, error: { message: outcome.message.slice(0, 4000), retryable: outcome.retryable, effect: outcome.effect, ...(outcome.name ? { name: outcome.name } : {}) } };
    }
    let bytes: Uint8Array;
    try {
      bytes = encode(result);
    } catch (e) {
      // An output too large to send is the handler's bug: report it as a permanent failure.
      // The handler ran and returned, so its effect is unknown to Triad (it may well have happened).
      result = { ...base, ok: false, error: { message: isTriadError(e) ? e.message : `output cannot be encoded: ${errorMessage(e)}`, retryable: false, effect: 'unknown' } };
      bytes = encode(result);
    }
    if (result.ok) this.metrics.succeeded++;
    else this.metrics.failed++;
    await this.results.send(bytes, `${req.taskId}:${req.step}:${req.kind}:${req.attempt}:result`);
  }
}
