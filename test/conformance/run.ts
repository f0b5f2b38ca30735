/**
 * One conformance run: a private nats-server, the streams a scheduler would create, the scripted
 * service, the agent under test started as N processes; then the kit plays the scheduler — publishes
 * every case's step requests, reads the RESULTS and dead-letter streams, watches which requests are
 * acknowledged — and judges each case.
 */
import { Buffer } from 'node:buffer';
import type { ConsumerMessages, JsMsg } from '@nats-io/jetstream';
import { PayloadStore, connectBus, ensureConsumer, ensureStreams, protocolHeaders, type Bus } from '@triad/bus';
import { DeadLetterSchema, ProbeReplySchema, decode, decodeResults, encode, names, unpackUntrusted } from '@triad/protocol';
import { sleep, startNats, startProcess, waitFor, type ActorProcess, type Teardown } from '../harness/index.js';
import { buildCases, type CaseObservation, type CaseSpec, type ObservedProbes, type ConsumerSeen, type KitContext, type ObservedDeadLetter, type ObservedRequest, type ObservedResult } from './cases.js';
import { floatPaths } from './encoding.js';
import { startScriptedService } from './service.js';

export interface ConformanceOptions {
  /** The agent's command line, run as `sh -c "exec <command>"`. */
  agentCmd: string;
  /** The agent type it serves. */
  agent: string;
  /** The environment variable through which the agent gets its service's URL. */
  serviceEnv: string;
  /** How many agent processes run at once (sharing the durable consumer). */
  instances: number;
  /** How long the agent may take to start pulling requests. */
  readyTimeoutMs: number;
  /** Extra environment for the agent processes. */
  env?: Record<string, string>;
  /** The agent processes' working directory (default: this process'). */
  cwd?: string;
  log?: (line: string) => void;
}

export interface CaseReport {
  name: string;
  title: string;
  ok: boolean;
  problems: string[];
  notes: string[];
}

export interface ConformanceReport {
  ok: boolean;
  agent: string;
  agentCmd: string;
  instances: number;
  namespace: string;
  durationMs: number;
  cases: CaseReport[];
  /** The agent processes' last output lines, when a case failed. */
  agentOutput?: string[];
}

/** The fields of a result that are integers (§8.7): a float there is refused by a typed reader. */
const INTEGER_FIELDS = ['attempt', 'finishedAt', 'tries', 'error.retryAfterMs'];

export async function runConformance(td: Teardown, o: ConformanceOptions): Promise<ConformanceReport> {
  const started = Date.now();
  const log = o.log ?? ((): void => undefined);
  const namespace = `conf${Date.now().toString(36)}${Math.floor(Math.random() * 1e6).toString(36)}`;
  const n = names(namespace);
  const nats = await startNats({ teardown: td });
  const service = await startScriptedService();
  td.add(() => service.close());
  const bus = await connectBus({ url: nats.url, namespace, name: 'triad-conformance' });
  td.add(() => bus.close());
  // The kit plays the scheduler: it creates the streams, as schedulers do (docs/protocol.md §3).
  await ensureStreams(bus);
  await ensureConsumer(bus, { stream: n.streams.results, durable: n.consumers.results, filterSubject: n.subjects.resultAll, ackWaitMs: 30_000 });

  const env = { NATS_URL: nats.url, TRIAD_NAMESPACE: namespace, [o.serviceEnv]: service.url, ...o.env };
  const agents: ActorProcess[] = [];
  const exited = new Map<ActorProcess, number | null>();
  for (let i = 1; i <= o.instances; i++) {
    const a = await startProcess({ name: `agent-${i}`, command: '/bin/sh', args: ['-c', `exec ${o.agentCmd}`], env, ...(o.cwd ? { cwd: o.cwd } : {}), teardown: td });
    void a.exited.then((code) => exited.set(a, code));
    agents.push(a);
  }
  log(`conformance: namespace ${namespace}, ${o.instances} agent process(es) of type ${o.agent}: ${o.agentCmd}`);
  const consumer = await waitForAgents(bus, o, agents, exited);

  const results: ObservedResult[] = [];
  const deadLetters: ObservedDeadLetter[] = [];
  const resultFeed = await bus.js.consumers.get(n.streams.results, n.consumers.results).then((c) => c.consume({ max_messages: 64, expires: 1_000 }));
  const dlqFeed = await bus.js.consumers.get(n.streams.deadLetters, { filter_subjects: n.subjects.deadLetterAll }).then((c) => c.consume());
  const reading = Promise.all([read(resultFeed, (m) => results.push(...readResults(m))), read(dlqFeed, (m) => deadLetters.push(readDeadLetter(m)))]);

  const ctx: KitContext = { namespace, agent: o.agent, t0: Date.now(), resultSubject: n.subjects.result(o.agent), deadLetterSubject: n.subjects.deadLetter(`step_${o.agent}`) };
  const cases = buildCases(ctx);
  for (const c of cases) {
    for (const [key, replies] of c.scripts) service.script(key, replies);
    for (const key of c.preApplied) service.preApply(key);
  }
  // The objects the cases' references point to (large payloads, docs/protocol.md §12).
  const objects = new PayloadStore(bus);
  for (const c of cases) {
    for (const ob of c.objects ?? []) {
      await objects.ensureBucket(ob.client);
      await objects.put(objects.bucketOf(ob.client), ob.name, ob.bytes);
    }
  }
  const sent = new Map<string, (ObservedRequest & { seq: number })[]>();
  for (const c of cases) {
    const list: (ObservedRequest & { seq: number })[] = [];
    for (const r of c.requests) {
      const bytes = encode(r.value);
      const ack = await bus.js.publish(n.subjects.step(o.agent), bytes, { msgID: r.msgId, headers: protocolHeaders() });
      list.push({ msgId: r.msgId, value: r.value, bytes, publishedAt: Date.now(), seq: ack.seq });
    }
    sent.set(c.name, list);
  }
  log(`conformance: ${[...sent.values()].flat().length} step requests sent for ${cases.length} cases`);
  const probing = new Map(cases.filter((c) => c.probe).map((c) => [c.name, probeDuringCall(bus, o.agent, c, () => service.calls())] as const));

  // Judged when there is nothing left to wait for: every case's own window has passed (a silence can only
  // be judged after it: complete-by plus one ack wait, the protocol's times), every request is acknowledged
  // (gone from the work-queue stream; an agent acknowledges only once its result is stored, §8.8), and every
  // result and dead letter stored has been read. A case whose agent never gets there is judged at the
  // deadline, and its judge says what is missing.
  const windowsEnd = ctx.t0 + Math.max(0, ...cases.map((c) => c.judgeAfterMs));
  const deadline = windowsEnd + JUDGE_DEADLINE_MS;
  for (;;) {
    const pending = [...sent.values()].flat().filter((r) => r.ackedAt === undefined);
    await Promise.all(
      pending.map(async (r) => {
        if ((await bus.jsm.streams.getMessage(n.streams.steps, { seq: r.seq }).catch(() => 'unknown')) === null) r.ackedAt = Date.now();
      }),
    );
    const acked = [...sent.values()].flat().every((r) => r.ackedAt !== undefined);
    if (acked && Date.now() >= windowsEnd && (await allRead(bus, deadLetters.length))) break;
    if (Date.now() >= deadline) break;
    await sleep(100);
  }
  const judgedAt = Date.now();
  resultFeed.stop();
  dlqFeed.stop();
  await reading;

  const reports: CaseReport[] = [];
  const attributed = new Set<ObservedResult>();
  for (const c of cases) {
    const requests = sent.get(c.name) ?? [];
    const mine = results.filter((r) => r.taskId === c.taskId);
    mine.forEach((r) => attributed.add(r));
    const observation: CaseObservation = {
      ctx,
      requests,
      calls: service.calls().filter((call) => c.keys.includes(call.idempotencyKey) || (call.of !== undefined && c.keys.includes(call.of))),
      results: mine,
      deadLetters: deadLetters.filter((d) => d.value !== undefined && requests.some((r) => Buffer.compare(Buffer.from(r.bytes), Buffer.from(d.value!.original)) === 0)),
      consumer,
      judgedAt,
      ...(probing.has(c.name) ? { probes: await probing.get(c.name) } : {}),
    };
    const v = c.judge(observation);
    // §2: agents should set the header; one naming another version is wrong.
    for (const r of mine) if (r.protocolHeader !== undefined && r.protocolHeader !== '1') v.problems.push(`a result's Triad-Protocol header is ${JSON.stringify(r.protocolHeader)}, not 1`);
    if (mine.some((r) => r.protocolHeader === undefined)) v.notes.push('a result has no Triad-Protocol header (agents should set it: §2)');
    reports.push({ name: c.name, title: c.title, ok: v.problems.length === 0, problems: v.problems, notes: v.notes });
  }
  const stray = results.filter((r) => !attributed.has(r));
  const gone = agents.filter((a) => exited.has(a));
  reports.push({
    name: 'results-and-liveness',
    title: 'every result message belongs to a request sent, and every agent process is still running at the end',
    ok: stray.length === 0 && gone.length === 0,
    problems: [
      ...stray.map((r) => `a result message on ${r.subject} matches no request sent: ${r.problems.join('; ') || JSON.stringify(r.value)}`),
      ...gone.map((a) => `${a.name} (pid ${a.pid}) exited during the run`),
    ],
    notes: [],
  });
  const ok = reports.every((r) => r.ok);
  return {
    ok,
    agent: o.agent,
    agentCmd: o.agentCmd,
    instances: o.instances,
    namespace,
    durationMs: Date.now() - started,
    cases: reports,
    ...(ok ? {} : { agentOutput: agents.flatMap((a) => a.output().trim().split('\n').slice(-30).map((l) => `${a.name}: ${l}`)) }),
  };
}

/**
 * Once the service sees the case's first call (the agent holds the attempt), probes the agent type's
 * instances for that attempt and for the next one (which no instance holds), and gathers the answers for
 * 500 ms (decision 0021 §3.3).
 */
async function probeDuringCall(bus: Bus, agent: string, c: CaseSpec, calls: () => { idempotencyKey: string }[]): Promise<ObservedProbes> {
  const s = bus.names.subjects;
  const seen = await waitFor(() => (calls().some((call) => c.keys.includes(call.idempotencyKey)) ? true : undefined), { timeoutMs: 20_000, what: `the call of case ${c.name}` }).catch(() => false);
  if (!seen) return { held: [], other: [], sent: false };
  const out: ObservedProbes = { held: [], other: [], sent: true };
  const nonce = Math.random().toString(16).slice(2, 18).padEnd(16, '0');
  const sub = bus.nc.subscribe(s.probedOf(nonce), {
    callback: (err, m) => {
      if (err) return;
      const d = decode(m.data, ProbeReplySchema, 'probe reply');
      const answer: ObservedProbes['held'][number] = d.ok ? { value: d.value, problems: [] } : { problems: [d.error.message] };
      if (!m.subject.startsWith(s.probedPrefix(agent))) answer.problems.push(`answered on ${m.subject}, not under ${s.probedPrefix(agent)}`);
      (m.subject.endsWith('.0') ? out.held : out.other).push(answer);
    },
  });
  await bus.nc.flush();
  for (const attempt of [1, 2]) bus.nc.publish(s.probe(agent), encode({ taskId: c.taskId, step: 's', kind: 'run', attempt }), { reply: s.probed(agent, nonce, attempt - 1) });
  await sleep(500);
  sub.unsubscribe();
  return out;
}

/**
 * Waits until the agent's durable consumer exists and an agent process pulls from it (its pending pull
 * requests), and returns the consumer as found. Fails at once when every agent process has exited.
 */
async function waitForAgents(bus: Bus, o: ConformanceOptions, agents: ActorProcess[], exited: ReadonlyMap<ActorProcess, number | null>): Promise<ConsumerSeen> {
  const durable = bus.names.consumers.agent(o.agent);
  const outputs = (): string => agents.map((a) => `${a.name}: ${a.output().trim().split('\n').slice(-10).join(`\n${a.name}: `) || '(no output)'}`).join('\n');
  const deadline = Date.now() + o.readyTimeoutMs;
  let last = 'no consumer yet';
  for (;;) {
    if (exited.size === agents.length) {
      const codes = agents.map((a) => `${a.name} exit code ${String(exited.get(a))}`).join(', ');
      throw new Error(`every agent process exited before it pulled a request (${codes}); is --agent-cmd right?\n${outputs()}`);
    }
    const ci = await bus.jsm.consumers.info(bus.names.streams.steps, durable).catch(() => undefined);
    if (ci) last = `consumer ${durable} exists, ${ci.num_waiting} pull request(s) waiting`;
    if (ci && ci.num_waiting > 0) {
      // Best effort: every instance pulling before the cases start (so a redelivery could reach another one).
      await waitFor(async () => ((await bus.jsm.consumers.info(bus.names.streams.steps, durable)).num_waiting >= agents.length ? true : undefined), {
        timeoutMs: 3_000,
        what: 'every instance to pull',
      }).catch(() => undefined);
      return {
        durable,
        filterSubject: ci.config.filter_subject,
        ackPolicy: ci.config.ack_policy,
        ackWaitMs: ci.config.ack_wait === undefined ? undefined : Math.round(ci.config.ack_wait / 1e6),
        deliverPolicy: ci.config.deliver_policy,
      };
    }
    if (Date.now() > deadline) {
      throw new Error(
        `timed out after ${o.readyTimeoutMs} ms waiting for agent type ${o.agent} to pull from its durable consumer ${durable} on ${bus.names.streams.steps} ` +
          `(last seen: ${last}); is --agent right, and does the command serve that type?\n${outputs()}`,
      );
    }
    await sleep(100);
  }
}

/** How long past the cases' windows the kit waits for an agent that has not acknowledged or answered everything. */
const JUDGE_DEADLINE_MS = 30_000;

/** Whether every result stored has been read (the results consumer has nothing pending) and every dead letter. */
async function allRead(bus: Bus, deadLettersRead: number): Promise<boolean> {
  const n = bus.names;
  const [results, dlq] = await Promise.all([bus.jsm.consumers.info(n.streams.results, n.consumers.results), bus.jsm.streams.info(n.streams.deadLetters)]);
  return results.num_pending === 0 && results.num_ack_pending === 0 && dlq.state.messages <= deadLettersRead;
}

async function read(feed: ConsumerMessages, on: (m: JsMsg) => void): Promise<void> {
  for await (const m of feed) {
    on(m);
    m.ack();
  }
}

/** The results of one message (one, or each of a batch), with what is wrong with each. */
function readResults(m: JsMsg): ObservedResult[] {
  const header = (name: string): string | undefined => m.headers?.get(name) || undefined;
  const base = { subject: m.subject, msgId: header('Nats-Msg-Id'), protocolHeader: header('Triad-Protocol'), receivedAt: Date.now() };
  const d = decodeResults(m.data);
  if (!d.ok) return [{ ...base, batched: false, problems: [d.error.message], ...looseTaskId(m.data) }];
  return d.value.items.map((item, i) => {
    const where = d.value.single ? '' : `result ${i + 1} of a batch: `;
    const floats = safeFloatPaths(item.bytes).filter((p) => INTEGER_FIELDS.includes(p));
    const problems = [...(item.ok ? [] : [item.error.message]), ...floats.map((p) => `${where}${p} is encoded as a msgpack float; integers must be msgpack integers (§1)`)];
    return item.ok
      ? { ...base, batched: !d.value.single, problems, value: item.value, taskId: item.value.taskId }
      : { ...base, batched: !d.value.single, problems, ...looseTaskId(item.bytes) };
  });
}

/** The task id of a result that is not valid, when it has a readable one: to tell which case it failed. */
function looseTaskId(bytes: Uint8Array): { taskId?: string } {
  const raw = unpackUntrusted(bytes, 'step result');
  const taskId = raw.ok && raw.value !== null && typeof raw.value === 'object' ? (raw.value as Record<string, unknown>)['taskId'] : undefined;
  return typeof taskId === 'string' ? { taskId } : {};
}

function safeFloatPaths(bytes: Uint8Array): string[] {
  try {
    return floatPaths(bytes);
  } catch {
    return [];
  }
}

function readDeadLetter(m: JsMsg): ObservedDeadLetter {
  const d = decode(m.data, DeadLetterSchema, 'dead letter');
  return d.ok ? { subject: m.subject, value: d.value, problems: [] } : { subject: m.subject, problems: [d.error.message] };
}
