/**
 * What each role of a namespace may do on NATS (publish/subscribe allow lists, JetStream API subjects
 * included, and which NATS account it lives in) and in Redis (ACL rules), derived from the subjects of
 * names.ts — the role table of decisions 0010 and 0022, written by `triad auth init` and tabulated in
 * docs/security.md. No I/O.
 */
import { z } from 'zod';
import { CLIENT_SCOPED_OPS, ClientIdSchema, NameSchema, NamespaceSchema, names, objectBucket, type ApiOp, type Names } from '@triad/protocol';

export const ROLES = ['scheduler', 'supervisor', 'agent', 'client', 'operator'] as const;
export type Role = (typeof ROLES)[number];

/** API operations that only read; the others change state (operator only). */
export const READ_ONLY_API_OPS: readonly ApiOp[] = ['workflow.get', 'workflow.list', 'task.get', 'task.list', 'task.query', 'task.count', 'task.stuck', 'task.events', 'supervisor.status'];

/**
 * The namespace-wide operations a client identity may call: the read-only ones except the task reads,
 * which it calls on its own client-scoped subjects instead (decision 0017).
 */
export const CLIENT_API_OPS: readonly ApiOp[] = READ_ONLY_API_OPS.filter((op) => !(CLIENT_SCOPED_OPS as readonly ApiOp[]).includes(op));

/** The client id an operator identity submits and reads under (its inbox, its submit subject). */
export const OPERATOR_CLIENT_ID = 'operator';

export interface NatsPermissions {
  publish: string[];
  subscribe: string[];
  /**
   * nats-server's `allow_responses`: the user may answer each request it received once, whatever its
   * reply subject (a service import's `_R_.…`), without a standing publish right there (decision 0022).
   */
  allowResponses?: boolean;
}

export interface RedisPermissions {
  /** ACL key patterns (`~pattern` without the tilde). */
  keys: string[];
  /** Commands (`+command`, or `+command|subcommand`, without the plus), lower case, sorted. */
  commands: string[];
}

export interface Identity {
  /** File-safe name: `scheduler`, `supervisor`, `agent-<type>`, `client-<id>`, `operator`. */
  name: string;
  role: Role;
  /** The agent type of an agent identity. */
  agent?: string;
  /** The client id of a client or operator identity (TRIAD_CLIENT_ID). */
  clientId?: string;
  /** The inbox prefix the identity's connection must use (nats.js `inboxPrefix`). */
  inboxPrefix: string;
  nats: NatsPermissions;
  /** Undefined: no Redis user at all (agents, clients, operators). */
  redis?: RedisPermissions;
}

/**
 * The inbox prefix of a service connection: `_INBOX.<ns>._<role>` (and `._agent.<type>` for an agent
 * serving one type). Client names start with a letter, so these never collide with a client's inbox.
 */
export function serviceInboxPrefix(namespace: string, role: 'scheduler' | 'supervisor' | 'agent', agents: readonly string[] = []): string {
  const ns = NamespaceSchema.parse(namespace);
  if (role !== 'agent') return `_INBOX.${ns}._${role}`;
  // One identity per agent type: a process serving several types cannot run under one of them.
  return agents.length === 1 ? `_INBOX.${ns}._agent.${agents[0] ?? ''}` : `_INBOX.${ns}._agents`;
}

/**
 * Connection basics every Redis user needs (ioredis: AUTH, the ready check's INFO, its CLIENT SETNAME/SETINFO;
 * on a Redis Cluster its CLUSTER SLOTS), and WAIT, which confirms a task's creation and an election on a
 * replica (TRIAD_REDIS_WAIT_REPLICAS, decision 0015). No SELECT: ioredis sends it only for a database
 * other than 0, and then the user may select that one only (decision 0022).
 */
const REDIS_CONNECTION = ['auth', 'hello', 'ping', 'info', 'quit', 'client|setname', 'client|getname', 'client|id', 'cluster|slots', 'wait'];

/** Reads of packages/store's TypeScript side (task views, lists, the deadline and alert indexes). */
const REDIS_READS = ['get', 'hget', 'hgetall', 'hkeys', 'hmget', 'hvals', 'smembers', 'zcount', 'zrange', 'zrangebyscore', 'zrevrange'];

/**
 * Commands the role's Lua scripts call (ACLs apply inside scripts too): the scheduler runs createTask,
 * applyResult, registerWorkflow, cancelTask, retryStep and releaseLeases (its task leases are taken inside
 * the transitions, decision 0006); the supervisor runs expireStep, expireTask, compactFinished,
 * purgeFinished, elect, resign, and fenceBucket and raiseEpoch (decision 0015), and Redlock's acquire,
 * extend and release scripts for its leadership lease (EXISTS, GET, SET, DEL — on the state store, and on
 * each TRIAD_REDLOCK_URLS instance, where the same user needs them; decision 0004). All include _common.
 * `permissions.test.ts` re-reads the scripts to keep this list true.
 */
export const REDIS_SCRIPT_COMMANDS = {
  scheduler: [
    'del', 'exists', 'get', 'hdel', 'hexists', 'hget', 'hgetall', 'hincrby', 'hkeys', 'hlen', 'hmget', 'hset', 'hsetnx', 'incr', 'llen', 'lpop', 'lrange', 'pexpire', 'rpush', 'sadd', 'scard', 'set', 'srem', 'zadd', 'zcard', 'zcount', 'zlexcount', 'zpopmin', 'zrange', 'zrangebylex', 'zrangebyscore', 'zrem', 'zrevrangebylex', 'zrevrangebyscore', 'zscore',
  ],
  supervisor: [
    'del', 'exists', 'get', 'hdel', 'hget', 'hgetall', 'hincrby', 'hkeys', 'hlen', 'hmget', 'hset', 'hsetnx', 'incr', 'llen', 'lpop', 'rpush', 'sadd', 'scard', 'set', 'srem', 'zadd', 'zcard', 'zcount', 'zlexcount', 'zpopmin', 'zrange', 'zrangebylex', 'zrangebyscore', 'zrem', 'zscore',
  ],
} as const;

/**
 * Which scripts each Redis role runs (the test checks the lists above against these files). The dispatch
 * limiters (decision 0020): schedulers queue, release, pump, configure (the API), read places and stats,
 * and register limits and pauses; the leader supervisor dequeues (`limitApply` without grants), reads
 * stats, retires empty limiters and removes their registry entries.
 */
export const REDIS_ROLE_SCRIPTS = {
  scheduler: ['createTask', 'applyResult', 'registerWorkflow', 'cancelTask', 'retryStep', 'releaseLeases', 'takeIntakeSlot', 'signalTask', 'putSchedule', 'pauseSchedule', 'deleteSchedule', 'limitApply', 'limitPump', 'limitConfigure', 'limitStats', 'limitPlace', 'limitRegister', 'querySearch', 'startOp', 'checkpointOp', 'endOp', 'startQueued', 'startChild', 'cancelChild', 'undoChild', 'childRefused', 'admitTask'],
  supervisor: ['expireStep', 'expireTask', 'compactFinished', 'purgeFinished', 'elect', 'resign', 'fenceBucket', 'raiseEpoch', 'fireSchedule', 'limitApply', 'limitStats', 'limitRetire', 'limitRegister', 'attachObjects', 'takeParentNotice', 'childEnded', 'dropParentNotice', 'admitTask'],
} as const;

function redisPermissions(namespace: string, role: 'scheduler' | 'supervisor', db = 0): RedisPermissions {
  // `zrem` from TypeScript: the alert outbox (supervisor) and the finished index; `hset`: the supervisor's
  // status; the scheduler's `hset`/`hdel`: the submission rate limits an operator sets (decision 0022);
  // the supervisor's `hdel`/`hexists`: the schedules' outbox (decision 0019 §6.3).
  const own = role === 'supervisor' ? ['hdel', 'hexists', 'hset', 'zrem'] : ['hdel', 'hset', 'zrem'];
  // Another database than 0: that one only (Redis' first-argument rule).
  const select = db === 0 ? [] : [`select|${db}`];
  const commands = new Set([...REDIS_CONNECTION, 'eval', 'evalsha', ...REDIS_READS, ...own, ...REDIS_SCRIPT_COMMANDS[role], ...select]);
  return { keys: [`triad:${namespace}:*`], commands: [...commands].sort() };
}

/** JetStream API subjects, one builder each, so the allow lists read like the operations they permit. */
function jsApi(n: Names) {
  const api = '$JS.API';
  return {
    accountInfo: `${api}.INFO`,
    streamCreate: (s: string) => `${api}.STREAM.CREATE.${s}`,
    streamUpdate: (s: string) => `${api}.STREAM.UPDATE.${s}`,
    streamInfo: (s: string) => `${api}.STREAM.INFO.${s}`,
    /** Create or update a named consumer with one filter subject (NATS ≥ 2.9): the filter is in the subject. */
    consumerCreate: (s: string, consumer: string, filter: string) => `${api}.CONSUMER.CREATE.${s}.${consumer}.${filter}`,
    consumerInfo: (s: string, consumer: string) => `${api}.CONSUMER.INFO.${s}.${consumer}`,
    consumerDelete: (s: string, consumer: string) => `${api}.CONSUMER.DELETE.${s}.${consumer}`,
    consumerList: (s: string) => `${api}.CONSUMER.LIST.${s}`,
    consumerNames: (s: string) => `${api}.CONSUMER.NAMES.${s}`,
    msgGet: (s: string) => `${api}.STREAM.MSG.GET.${s}`,
    next: (s: string, consumer: string) => `${api}.CONSUMER.MSG.NEXT.${s}.${consumer}`,
    ack: (s: string, consumer: string) => `$JS.ACK.${s}.${consumer}.>`,
    streams: Object.values(n.streams),
  };
}

/**
 * The object store buckets of a namespace's clients (decision 0021 §4.3; the operator's included): each
 * is one subject token, so no wildcard reaches "every bucket of this namespace" — the identities that
 * touch payloads get each listed client's bucket by name.
 */
function objectBuckets(namespace: string, clients: readonly string[]): string[] {
  return uniq([...clients, OPERATOR_CLIENT_ID]).map((c) => objectBucket(namespace, c));
}

/**
 * What a role may do in one client bucket `b` (stream `OBJ_<b>`): `read` — an object's metadata and its
 * chunks one stored message at a time (message get: no consumer); `write` — publish chunks and metadata;
 * `ensure` — create the bucket; `delete` — a delete marker and a purge of the object's chunks; `info` — the
 * bucket's stream info (nats.go's object store binds with it before a write).
 */
function bucketAccess(j: ReturnType<typeof jsApi>, b: string, o: { read?: boolean; write?: boolean; ensure?: boolean; delete?: boolean; info?: boolean }): string[] {
  const stream = `OBJ_${b}`;
  return [
    ...(o.read ? [j.msgGet(stream)] : []),
    ...(o.info ? [j.streamInfo(stream)] : []),
    ...(o.write ? [`$O.${b}.C.*`, `$O.${b}.M.*`] : []),
    ...(o.ensure ? [j.streamCreate(stream), j.streamUpdate(stream), j.streamInfo(stream)] : []),
    ...(o.delete ? [`$O.${b}.M.*`, `$JS.API.STREAM.PURGE.${stream}`] : []),
  ];
}

/** A durable this role consumes: create/update it, read its info, pull from it, acknowledge its messages. */
function durableAccess(j: ReturnType<typeof jsApi>, stream: string, durable: string, filter: string): string[] {
  return [j.consumerCreate(stream, durable, filter), j.consumerInfo(stream, durable), j.next(stream, durable), j.ack(stream, durable), j.streamInfo(stream)];
}

function uniq(xs: string[]): string[] {
  return [...new Set(xs)];
}

export function schedulerIdentity(namespace: string, redisDb = 0, clients: readonly string[] = []): Identity {
  const n = names(namespace);
  const s = n.subjects;
  const j = jsApi(n);
  const inboxPrefix = serviceInboxPrefix(n.namespace, 'scheduler');
  return {
    name: 'scheduler',
    role: 'scheduler',
    inboxPrefix,
    nats: {
      publish: uniq([
        s.stepAll,
        s.eventAll,
        s.deadLetterAll,
        s.health,
        // Events to a submitter's reply subject, API replies, discovery answers: any inbox of the namespace.
        `_INBOX.${n.namespace}.>`,
        // Before a dispatch limit is set, which schedulers run them (decision 0020 §1.8's limits1 probe).
        `$SRV.INFO.triad-${n.namespace}`,
        j.accountInfo,
        ...j.streams.flatMap((st) => [j.streamCreate(st), j.streamUpdate(st), j.streamInfo(st)]),
        ...durableAccess(j, n.streams.submit, n.consumers.scheduler, s.submitAll),
        ...durableAccess(j, n.streams.results, n.consumers.results, s.resultAll),
        ...durableAccess(j, n.streams.commands, n.consumers.commands, s.command),
        // Registration warnings list the agents' durables.
        j.consumerList(n.streams.steps),
        j.consumerNames(n.streams.steps),
        // task.events reads a task's events by subject (decision 0022).
        j.msgGet(n.streams.events),
        // Every client's bucket: ensured before its tasks exist, and the payload broker's uploads and
        // downloads for clients, which have no JetStream (decision 0021 §4, settled with 0022).
        ...objectBuckets(n.namespace, clients).flatMap((b) => bucketAccess(j, b, { read: true, write: true, ensure: true })),
      ]),
      subscribe: [`${inboxPrefix}.>`, s.apiAll, `$SRV.*`, `$SRV.*.triad-${n.namespace}`, `$SRV.*.triad-${n.namespace}.>`],
      // API answers to clients in their own accounts go to `_R_.…` subjects: once per request received.
      allowResponses: true,
    },
    redis: redisPermissions(n.namespace, 'scheduler', redisDb),
  };
}

export function supervisorIdentity(namespace: string, redisDb = 0, clients: readonly string[] = []): Identity {
  const n = names(namespace);
  const s = n.subjects;
  const j = jsApi(n);
  const inboxPrefix = serviceInboxPrefix(n.namespace, 'supervisor');
  return {
    name: 'supervisor',
    role: 'supervisor',
    inboxPrefix,
    nats: {
      publish: uniq([
        s.command,
        // Schedules' tasks, in the name of the schedule's client (decision 0019 §6.3).
        s.submitAll,
        s.eventAll,
        s.alert,
        s.health,
        s.deadLetterAll,
        `_INBOX.${n.namespace}.>`,
        j.accountInfo,
        // It ensures the streams at start as the scheduler does (it may start first), and reads their state.
        ...j.streams.flatMap((st) => [j.streamCreate(st), j.streamUpdate(st), j.streamInfo(st)]),
        // With tracing on, a task's latest event (its trace context) by subject.
        j.msgGet(n.streams.events),
        // The object GC lists the namespace's buckets (stream names only) and walks their metadata.
        '$JS.API.STREAM.NAMES',
        // Retention deletes purged tasks' objects (decision 0021 §4.6).
        ...objectBuckets(n.namespace, clients).flatMap((b) => bucketAccess(j, b, { read: true, delete: true })),
      ]),
      subscribe: [`${inboxPrefix}.>`],
    },
    redis: redisPermissions(n.namespace, 'supervisor', redisDb),
  };
}

export function agentIdentity(namespace: string, agent: string, clients: readonly string[] = []): Identity {
  const n = names(namespace);
  const type = NameSchema.parse(agent);
  const s = n.subjects;
  const j = jsApi(n);
  const inboxPrefix = serviceInboxPrefix(n.namespace, 'agent', [type]);
  return {
    name: `agent-${type}`,
    role: 'agent',
    agent: type,
    inboxPrefix,
    nats: {
      publish: uniq([
        s.result(type),
        // Its consumer loop's dead letters (source `step.<type>`, one subject token).
        s.deadLetter(`step_${type}`),
        j.accountInfo,
        ...durableAccess(j, n.streams.steps, n.consumers.agent(type), s.step(type)),
        // Step request batches (decision 0023): its own type's batch durable, nobody else's.
        ...durableAccess(j, n.streams.steps, n.consumers.agentBatch(type), s.stepBatch(type)),
        j.streamInfo(n.streams.results),
        j.streamInfo(n.streams.deadLetters),
        // Answers to probes of its own type only (decision 0021 §3.3).
        `${s.probedPrefix(type)}>`,
        // Inputs and needs read, large outputs written, in every client's bucket; neither create nor delete
        // (decision 0021 §4.9: the bucket is the smallest unit a permission can name).
        ...objectBuckets(n.namespace, clients).flatMap((b) => bucketAccess(j, b, { read: true, write: true, info: true })),
      ]),
      subscribe: [`${inboxPrefix}.>`, s.probe(type)],
    },
  };
}

function clientLike(namespace: string, clientId: string, role: 'client' | 'operator'): Identity {
  const n = names(namespace);
  const id = ClientIdSchema.parse(clientId);
  const s = n.subjects;
  const j = jsApi(n);
  const inboxPrefix = s.inboxPrefix(id);
  if (role === 'client') {
    // No JetStream API but the connect probe (which its own account answers "not enabled"): it reads its
    // tasks' events by subscription and their history through task.events (decision 0022).
    return {
      name: `client-${id}`,
      role,
      clientId: id,
      inboxPrefix,
      nats: {
        publish: uniq([
          s.submit(id),
          j.accountInfo,
          ...CLIENT_API_OPS.map((op) => s.api(op)),
          // Its own tasks only: the scheduler reads the client from the subject (decision 0017).
          ...CLIENT_SCOPED_OPS.map((op) => s.clientApi(id, op)),
        ]),
        subscribe: [`${inboxPrefix}.>`, s.event(id, '*')],
      },
    };
  }
  return {
    name: 'operator',
    role,
    clientId: id,
    inboxPrefix,
    nats: {
      publish: uniq([
        // Its own submissions, and the replay of a dead-lettered one of any client or of a command
        // (decision 0022: not step requests nor results).
        s.submitAll,
        s.command,
        j.accountInfo,
        s.apiAll,
        `$SRV.>`,
        // Dead letters, alerts and events one message at a time (no consumers: decision 0022).
        ...[n.streams.events, n.streams.alerts, n.streams.deadLetters].map((st) => j.msgGet(st)),
        ...j.streams.map((st) => j.streamInfo(st)),
        ...j.streams.flatMap((st) => [j.consumerList(st), j.consumerNames(st)]),
        // Which agent instance holds an attempt (decision 0021 §3.3), for triad status and the dashboard,
        // and the queues a step and a submission wait in (its agent type's durable, the schedulers').
        s.probe('*'),
        j.consumerInfo(n.streams.steps, '*'),
        j.consumerInfo(n.streams.submit, n.consumers.scheduler),
      ]),
      subscribe: [`${inboxPrefix}.>`, `triad.${n.namespace}.event.>`, s.alert, s.health, `triad.${n.namespace}.dlq.>`, s.probedAll],
    },
  };
}

export function clientIdentity(namespace: string, clientId: string): Identity {
  if (clientId === OPERATOR_CLIENT_ID) throw new Error(`"${OPERATOR_CLIENT_ID}" is the operator's client id: choose another name for a client`);
  return clientLike(namespace, clientId, 'client');
}

export function operatorIdentity(namespace: string): Identity {
  return clientLike(namespace, OPERATOR_CLIENT_ID, 'operator');
}

export const DeploymentSchema = z.object({
  namespace: NamespaceSchema,
  agents: z.array(NameSchema).min(1, 'name at least one agent type'),
  clients: z.array(ClientIdSchema.refine((c) => c !== OPERATOR_CLIENT_ID, `"${OPERATOR_CLIENT_ID}" is the operator's client id: choose another name for a client`)).default([]),
  /** The Redis database the scheduler and supervisor use (their REDIS_URL's path): their users may select it only. */
  redisDb: z.number().int().min(0).max(15_999).default(0),
});
export type DeploymentInput = z.input<typeof DeploymentSchema>;

/** Every identity of one namespace's deployment: scheduler, supervisor, one per agent type, one per client, the operator. */
export function deploymentIdentities(input: DeploymentInput): Identity[] {
  const d = DeploymentSchema.parse(input);
  return [
    schedulerIdentity(d.namespace, d.redisDb, d.clients),
    supervisorIdentity(d.namespace, d.redisDb, d.clients),
    ...uniq(d.agents).map((a) => agentIdentity(d.namespace, a, d.clients)),
    ...uniq(d.clients).map((c) => clientIdentity(d.namespace, c)),
    operatorIdentity(d.namespace),
  ];
}

/** A subject one account makes available to others: a service (requests, answered back) or a stream (messages). */
export interface NatsExport {
  kind: 'service' | 'stream';
  subject: string;
  /** The accounts that may import it. */
  accounts: string[];
}

/** One NATS account of a deployment (config-file accounts, decision 0022). */
export interface NatsAccount {
  name: string;
  /** JetStream enabled (only the namespace's own account holds streams). */
  jetstream: boolean;
  /** The identities (by `Identity.name`) whose users live in it. */
  identities: string[];
  exports: NatsExport[];
  /** What it imports, under the same subject names. */
  imports: { kind: 'service' | 'stream'; account: string; subject: string }[];
}

/**
 * The account of a namespace's services, agents and operator: it holds the streams. `:` occurs in no
 * namespace or name, so account names never collide; JetStream keeps the account's store under this name.
 */
export function triadAccountName(namespace: string): string {
  return `triad:${NamespaceSchema.parse(namespace)}`;
}

/** The account of one client: nothing in it but what the namespace's account exports to it. */
export function clientAccountName(namespace: string, clientId: string): string {
  return `${triadAccountName(namespace)}:client:${ClientIdSchema.parse(clientId)}`;
}

/** What a client's account imports: its submit subject and API, the read-only API, its events and its inbox. */
function clientImports(namespace: string, clientId: string): { kind: 'service' | 'stream'; subject: string; shared: boolean }[] {
  const s = names(namespace).subjects;
  return [
    { kind: 'service', subject: s.submit(clientId), shared: false },
    ...CLIENT_SCOPED_OPS.map((op) => ({ kind: 'service' as const, subject: s.clientApi(clientId, op), shared: false })),
    ...CLIENT_API_OPS.map((op) => ({ kind: 'service' as const, subject: s.api(op), shared: true })),
    { kind: 'stream', subject: s.event(clientId, '*'), shared: false },
    { kind: 'stream', subject: `${s.inboxPrefix(clientId)}.>`, shared: false },
  ];
}

/**
 * The accounts of one namespace's deployment: `triad:<ns>` with every identity but the clients, exporting
 * to each client's own account just what that client may use; one account per client, importing it.
 * A client then reaches nothing else, and every answer to it (a PubAck, an API reply) is routed by the
 * server into its own account, whatever reply subject it named (decision 0022).
 */
export function deploymentAccounts(input: DeploymentInput): NatsAccount[] {
  const d = DeploymentSchema.parse(input);
  const ids = deploymentIdentities(d);
  const triad = triadAccountName(d.namespace);
  const clients = uniq(d.clients);
  const exports = new Map<string, NatsExport>();
  for (const c of clients) {
    for (const i of clientImports(d.namespace, c)) {
      const key = `${i.kind} ${i.subject}`;
      const e = exports.get(key) ?? { kind: i.kind, subject: i.subject, accounts: [] };
      e.accounts.push(clientAccountName(d.namespace, c));
      exports.set(key, e);
    }
  }
  return [
    { name: triad, jetstream: true, identities: ids.filter((i) => i.role !== 'client').map((i) => i.name), exports: [...exports.values()], imports: [] },
    ...clients.map((c) => ({
      name: clientAccountName(d.namespace, c),
      jetstream: false,
      identities: [`client-${c}`],
      exports: [],
      imports: clientImports(d.namespace, c).map((i) => ({ kind: i.kind, account: triad, subject: i.subject })),
    })),
  ];
}

/** One line of a Redis ACL file for the identity (`user <name> on #<sha256> ~keys resetchannels -@all +cmd…`). */
export function redisAclLine(user: string, passwordSha256: string, r: RedisPermissions): string {
  return ['user', user, 'reset', 'on', `#${passwordSha256}`, ...r.keys.map((k) => `~${k}`), 'resetchannels', '-@all', ...r.commands.map((c) => `+${c}`)].join(' ');
}

/** Whether a NATS subject pattern (`*`, `>`) matches a subject. */
export function subjectMatches(pattern: string, subject: string): boolean {
  const p = pattern.split('.');
  const t = subject.split('.');
  for (let i = 0; i < p.length; i++) {
    if (p[i] === '>') return t.length > i;
    if (i >= t.length) return false;
    if (p[i] !== '*' && p[i] !== t[i]) return false;
  }
  return p.length === t.length;
}

/**
 * Which roles of the namespace the subject belongs to, for an operation: a refusal's message says who
 * may do it ("the operator role may"). Agents and clients are described by their subject part.
 */
export function rolesAllowed(namespace: string, operation: 'publish' | 'subscribe', subject: string): string[] {
  const ns = NamespaceSchema.safeParse(namespace);
  if (!ns.success) return [];
  const dlqStep = `triad.${ns.data}.dlq.step_`;
  const agent =
    subject.startsWith(`triad.${ns.data}.result.`) || subject.startsWith(`triad.${ns.data}.step.`)
      ? subject.split('.')[3]
      : subject.startsWith(dlqStep)
        ? subject.slice(dlqStep.length)
        : undefined;
  const client = subject.startsWith(`triad.${ns.data}.submit.`)
    ? subject.split('.')[3]
    : subject.startsWith(`triad.${ns.data}.api.client.`)
      ? subject.split('.')[4]
      : subject.startsWith(`_INBOX.${ns.data}.`)
        ? subject.split('.')[2]
        : undefined;
  const candidates: Identity[] = [schedulerIdentity(ns.data), supervisorIdentity(ns.data), operatorIdentity(ns.data)];
  if (agent && NameSchema.safeParse(agent).success) candidates.push(agentIdentity(ns.data, agent));
  if (client && ClientIdSchema.safeParse(client).success && client !== OPERATOR_CLIENT_ID) candidates.push(clientIdentity(ns.data, client));
  else candidates.push(clientIdentity(ns.data, 'CLIENT'));
  return candidates
    .filter((i) => i.nats[operation].some((p) => subjectMatches(p, subject)))
    .map((i) => (i.role === 'agent' ? `agent "${i.agent ?? ''}"` : i.role === 'client' ? (i.clientId === 'CLIENT' ? 'client' : `client "${i.clientId ?? ''}"`) : i.role));
}
