// The role table (decisions 0010, 0016, 0022) as data: each role reaches its own subjects and no other
// role's, clients live in NATS accounts of their own, namespaces share nothing, and the Redis command
// lists cover exactly what the Lua scripts call.
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { CLIENT_SCOPED_OPS, names } from '@triad/protocol';
import {
  REDIS_ROLE_SCRIPTS,
  REDIS_SCRIPT_COMMANDS,
  clientAccountName,
  deploymentAccounts,
  deploymentIdentities,
  triadAccountName,
  redisAclLine,
  rolesAllowed,
  subjectMatches,
  type Identity,
} from '../src/index.js';

const LUA = join(dirname(fileURLToPath(import.meta.url)), '../../store/lua');

/** A script's text with every `--@include <fragment>` inlined, recursively (as the store loads it). */
function luaText(script: string, seen: Set<string> = new Set()): string {
  if (seen.has(script)) return '';
  seen.add(script);
  const text = readFileSync(join(LUA, `${script}.lua`), 'utf8');
  return text.replace(/^--@include (\w+)\s*$/gm, (_m, inc: string) => luaText(inc, seen));
}

function luaCommands(script: string): Set<string> {
  return new Set([...luaText(script).matchAll(/redis\.p?call\(\s*['"]([A-Za-z]+)['"]/g)].map((m) => (m[1] ?? '').toLowerCase()));
}

function may(id: Identity, op: 'publish' | 'subscribe', subject: string): boolean {
  return id.nats[op].some((p) => subjectMatches(p, subject));
}

const ids = deploymentIdentities({ namespace: 'shop', agents: ['payment', 'shipping'], clients: ['web'] });
const byName = (n: string): Identity => {
  const id = ids.find((i) => i.name === n);
  if (!id) throw new Error(`no identity ${n}`);
  return id;
};
const n = names('shop');

describe('NATS allow lists', () => {
  it('matches subjects token by token', () => {
    expect(subjectMatches('a.*.c', 'a.b.c')).toBe(true);
    expect(subjectMatches('a.*', 'a.b.c')).toBe(false);
    expect(subjectMatches('a.>', 'a.b.c')).toBe(true);
    expect(subjectMatches('a.>', 'a')).toBe(false);
  });

  it('an agent publishes only its own results and pulls only its own steps', () => {
    const payment = byName('agent-payment');
    expect(may(payment, 'publish', n.subjects.result('payment'))).toBe(true);
    expect(may(payment, 'publish', n.subjects.result('shipping'))).toBe(false);
    expect(may(payment, 'publish', n.subjects.submit('web'))).toBe(false);
    expect(may(payment, 'publish', n.subjects.api('task.get'))).toBe(false);
    expect(may(payment, 'publish', `$JS.API.CONSUMER.MSG.NEXT.${n.streams.steps}.agent-payment`)).toBe(true);
    expect(may(payment, 'publish', `$JS.API.CONSUMER.MSG.NEXT.${n.streams.steps}.agent-shipping`)).toBe(false);
    expect(may(payment, 'publish', `$JS.API.CONSUMER.CREATE.${n.streams.steps}.agent-payment.${n.subjects.step('payment')}`)).toBe(true);
    expect(may(payment, 'publish', `$JS.API.CONSUMER.CREATE.${n.streams.steps}.agent-shipping.${n.subjects.step('shipping')}`)).toBe(false);
    expect(may(payment, 'subscribe', '_INBOX.shop.web.x')).toBe(false);
    expect(payment.redis).toBeUndefined();
  });

  it('probes (decision 0021 §3.3): the operator asks any agent type; an agent hears only its own type\'s and answers only under it; a client does neither', () => {
    const payment = byName('agent-payment');
    const operator = byName('operator');
    const web = byName('client-web');
    expect(may(payment, 'subscribe', n.subjects.probe('payment'))).toBe(true);
    expect(may(payment, 'subscribe', n.subjects.probe('shipping'))).toBe(false);
    expect(may(payment, 'publish', n.subjects.probed('payment', 'abcd', 3))).toBe(true);
    expect(may(payment, 'publish', n.subjects.probed('shipping', 'abcd', 3))).toBe(false);
    expect(may(payment, 'publish', '_INBOX.shop.operator.x')).toBe(false);
    expect(may(operator, 'publish', n.subjects.probe('shipping'))).toBe(true);
    expect(may(operator, 'subscribe', n.subjects.probedOf('abcd'))).toBe(true);
    expect(may(operator, 'publish', `$JS.API.CONSUMER.INFO.${n.streams.steps}.agent-payment`)).toBe(true);
    expect(may(web, 'publish', n.subjects.probe('payment'))).toBe(false);
    expect(may(web, 'subscribe', n.subjects.probedOf('abcd'))).toBe(false);
  });

  it('a client submits under its own id, reads only, and follows only its own events, with no JetStream API (decision 0022)', () => {
    const web = byName('client-web');
    expect(may(web, 'publish', n.subjects.submit('web'))).toBe(true);
    expect(may(web, 'publish', n.subjects.submit('operator'))).toBe(false);
    for (const op of ['task.cancel', 'task.retry', 'workflow.register', 'alert.list', 'intake.set', 'intake.list', 'intake.clear'] as const) expect(may(web, 'publish', n.subjects.api(op)), op).toBe(false);
    for (const op of ['workflow.get', 'workflow.list', 'supervisor.status'] as const) expect(may(web, 'publish', n.subjects.api(op)), op).toBe(true);
    expect(may(web, 'publish', n.subjects.result('payment'))).toBe(false);
    // No consumer of any kind, on any stream: its own events come by subscription and through task.events.
    expect(web.nats.publish.filter((p) => p.startsWith('$JS.'))).toEqual(['$JS.API.INFO']);
    expect(may(web, 'subscribe', n.subjects.event('web', 't1'))).toBe(true);
    expect(may(web, 'subscribe', n.subjects.event('other', 't1'))).toBe(false);
    expect(may(web, 'subscribe', '_INBOX.shop.web.abc')).toBe(true);
    expect(may(web, 'subscribe', '_INBOX.shop.other.abc')).toBe(false);
    expect(web.redis).toBeUndefined();
  });

  it("a client reads tasks only on its own client-scoped subjects, never the namespace-wide ones (decision 0017)", () => {
    const web = byName('client-web');
    for (const op of CLIENT_SCOPED_OPS) {
      expect(may(web, 'publish', n.subjects.api(op)), op).toBe(false);
      expect(may(web, 'publish', n.subjects.clientApi('web', op)), op).toBe(true);
      expect(may(web, 'publish', n.subjects.clientApi('other', op)), op).toBe(false);
      expect(may(web, 'publish', n.subjects.clientApi('operator', op)), op).toBe(false);
    }
    // Only the scoped reads: no other operation under its scope, and no wildcard a client could abuse.
    expect(may(web, 'publish', 'triad.shop.api.client.web.task.cancel')).toBe(false);
    expect(web.nats.publish.filter((p) => p.startsWith('triad.shop.api.'))).toEqual([
      'triad.shop.api.workflow.get',
      'triad.shop.api.workflow.list',
      'triad.shop.api.supervisor.status',
      'triad.shop.api.client.web.task.get',
      'triad.shop.api.client.web.task.list',
      'triad.shop.api.client.web.task.query',
      'triad.shop.api.client.web.task.count',
      'triad.shop.api.client.web.task.stuck',
      'triad.shop.api.client.web.task.events',
      'triad.shop.api.client.web.task.signal',
      'triad.shop.api.client.web.payload.put',
      'triad.shop.api.client.web.payload.get',
    ]);
    // A client signals only its own tasks (decision 0019 §3.2): not on the namespace-wide subject.
    expect(may(web, 'publish', n.subjects.api('task.signal'))).toBe(false);
    expect(may(byName('operator'), 'publish', n.subjects.api('task.signal'))).toBe(true);
    // The scheduler hears them on its API subscription.
    expect(may(byName('scheduler'), 'subscribe', n.subjects.clientApi('web', 'task.get'))).toBe(true);
    // Bulk operations are the operator's alone (decision 0021 §2.4): no client subject reaches them.
    for (const o of ['bulk.start', 'bulk.apply', 'bulk.checkpoint', 'bulk.end', 'bulk.get', 'bulk.list'] as const) {
      expect(may(web, 'publish', n.subjects.api(o)), o).toBe(false);
      expect(may(byName('operator'), 'publish', n.subjects.api(o)), o).toBe(true);
    }
  });

  it('object store buckets (decision 0021 §4.9): agents read and write every client bucket, never create or purge; clients reach none directly', () => {
    const web = 'triad_4_shop_web';
    const op = 'triad_4_shop_operator';
    const payment = byName('agent-payment');
    for (const b of [web, op]) {
      expect(may(payment, 'publish', `$O.${b}.C.abc`), b).toBe(true);
      expect(may(payment, 'publish', `$O.${b}.M.abc`), b).toBe(true);
      expect(may(payment, 'publish', `$JS.API.STREAM.MSG.GET.OBJ_${b}`), b).toBe(true);
      expect(may(payment, 'publish', `$JS.API.STREAM.PURGE.OBJ_${b}`), b).toBe(false);
      expect(may(payment, 'publish', `$JS.API.STREAM.CREATE.OBJ_${b}`), b).toBe(false);
      expect(may(payment, 'publish', `$JS.API.CONSUMER.CREATE.OBJ_${b}`), b).toBe(false);
    }
    // A bucket of a client auth init does not know: nobody's (its name is one token).
    expect(may(payment, 'publish', '$O.triad_4_shop_other.C.abc')).toBe(false);
    // Clients go through the schedulers' payload broker, on their own scoped subjects (no JetStream: 0022).
    const client = byName('client-web');
    expect(may(client, 'publish', `$O.${web}.C.abc`)).toBe(false);
    expect(may(client, 'publish', n.subjects.clientApi('web', 'payload.put'))).toBe(true);
    expect(may(client, 'publish', n.subjects.clientApi('web', 'payload.get'))).toBe(true);
    expect(may(client, 'publish', n.subjects.api('payload.get'))).toBe(false);
    // The scheduler ensures buckets and brokers; the supervisor deletes.
    expect(may(byName('scheduler'), 'publish', `$JS.API.STREAM.CREATE.OBJ_${web}`)).toBe(true);
    expect(may(byName('scheduler'), 'publish', `$O.${web}.C.abc`)).toBe(true);
    expect(may(byName('supervisor'), 'publish', `$JS.API.STREAM.PURGE.OBJ_${web}`)).toBe(true);
    expect(may(byName('supervisor'), 'publish', `$O.${web}.C.abc`)).toBe(false);
  });

  it('the operator may cancel, retry, register, set limits, read alerts and dead letters, and replay submissions and commands', () => {
    const op = byName('operator');
    for (const o of ['task.cancel', 'task.retry', 'workflow.register', 'alert.list', 'task.get', 'task.list', 'task.events', 'intake.set', 'intake.list', 'intake.clear'] as const) {
      expect(may(op, 'publish', n.subjects.api(o))).toBe(true);
    }
    expect(may(op, 'publish', n.subjects.clientApi('web', 'task.get'))).toBe(true);
    expect(may(op, 'publish', `$JS.API.STREAM.MSG.GET.${n.streams.deadLetters}`)).toBe(true);
    // Replays go to a dead letter's own source: a submission of any client, or a command (decision 0022) …
    expect(may(op, 'publish', n.subjects.submit('web'))).toBe(true);
    expect(may(op, 'publish', n.subjects.command)).toBe(true);
    // … not a result or a step request, and it creates no consumers (no push delivery anywhere).
    expect(may(op, 'publish', n.subjects.result('payment'))).toBe(false);
    expect(may(op, 'publish', n.subjects.step('payment'))).toBe(false);
    expect(op.nats.publish.filter((p) => p.includes('CONSUMER.CREATE') || p.includes('MSG.NEXT'))).toEqual([]);
  });

  it('only the scheduler answers requests, once each, on whatever reply subject the server made (allow_responses)', () => {
    expect(ids.filter((i) => i.nats.allowResponses).map((i) => i.name)).toEqual(['scheduler']);
  });

  it("no identity of one namespace reaches another namespace's subjects, streams or inboxes", () => {
    const other = names('shop2');
    const theirs = [
      other.subjects.submit('web'),
      other.subjects.result('payment'),
      other.subjects.step('payment'),
      other.subjects.event('web', 't1'),
      other.subjects.api('task.get'),
      other.subjects.clientApi('web', 'task.get'),
      other.subjects.command,
      other.subjects.alert,
      '_INBOX.shop2.web.x',
      '_INBOX.shop2._scheduler.x',
      ...Object.values(other.streams).flatMap((s) => [`$JS.API.STREAM.INFO.${s}`, `$JS.API.CONSUMER.MSG.NEXT.${s}.scheduler`, `$JS.API.CONSUMER.CREATE.${s}.x.triad.shop2.event.web.t1`, `$JS.ACK.${s}.scheduler.1.1.1.1.1`]),
    ];
    for (const id of ids) for (const op of ['publish', 'subscribe'] as const) for (const s of theirs) expect(may(id, op, s), `${id.name} ${op} ${s}`).toBe(false);
  });

  it('names who may do a refused operation', () => {
    expect(rolesAllowed('shop', 'publish', n.subjects.api('task.cancel'))).toEqual(['operator']);
    expect(rolesAllowed('shop', 'publish', n.subjects.result('payment'))).toEqual(['agent "payment"']);
    // The supervisor submits a schedule's tasks in its client's name (decision 0019 §6.3).
    expect(rolesAllowed('shop', 'publish', n.subjects.submit('web'))).toEqual(['supervisor', 'operator', 'client "web"']);
    // Schedules are the operator's alone: a client is refused every schedule operation.
    for (const op of ['schedule.create', 'schedule.get', 'schedule.list', 'schedule.pause', 'schedule.resume', 'schedule.delete'] as const) {
      expect(rolesAllowed('shop', 'publish', n.subjects.api(op)), op).toEqual(['operator']);
      expect(may(byName('client-web'), 'publish', n.subjects.api(op)), op).toBe(false);
    }
    expect(rolesAllowed('shop', 'publish', n.subjects.deadLetter('step_fraud'))).toEqual(['scheduler', 'supervisor', 'agent "fraud"']);
    expect(rolesAllowed('shop', 'publish', n.subjects.deadLetter('submit'))).toEqual(['scheduler', 'supervisor']);
    expect(rolesAllowed('shop', 'publish', 'triad.other.api.task.get')).toEqual([]);
    expect(rolesAllowed('shop', 'publish', n.subjects.api('task.get'))).toEqual(['operator']);
    expect(rolesAllowed('shop', 'publish', n.subjects.clientApi('web', 'task.list'))).toEqual(['operator', 'client "web"']);
  });
});

describe('NATS accounts (decision 0022)', () => {
  const accounts = deploymentAccounts({ namespace: 'shop', agents: ['payment', 'shipping'], clients: ['web', 'app'] });
  const [triad, web, app] = accounts;

  it("puts the namespace's services, agents and operator in one account with JetStream, each client in its own without", () => {
    expect(accounts.map((a) => a.name)).toEqual([triadAccountName('shop'), clientAccountName('shop', 'web'), clientAccountName('shop', 'app')]);
    expect(triad).toMatchObject({ name: 'triad:shop', jetstream: true, identities: ['scheduler', 'supervisor', 'agent-payment', 'agent-shipping', 'operator'] });
    expect(web).toMatchObject({ name: 'triad:shop:client:web', jetstream: false, identities: ['client-web'], exports: [] });
  });

  it('a client account imports exactly what its identity may use, and nothing of another client', () => {
    const imports = (web?.imports ?? []).map((i) => `${i.kind} ${i.subject}`);
    expect(imports).toEqual([
      'service triad.shop.submit.web',
      'service triad.shop.api.client.web.task.get',
      'service triad.shop.api.client.web.task.list',
      'service triad.shop.api.client.web.task.query',
      'service triad.shop.api.client.web.task.count',
      'service triad.shop.api.client.web.task.stuck',
      'service triad.shop.api.client.web.task.events',
      'service triad.shop.api.client.web.task.signal',
      'service triad.shop.api.client.web.payload.put',
      'service triad.shop.api.client.web.payload.get',
      'service triad.shop.api.workflow.get',
      'service triad.shop.api.workflow.list',
      'service triad.shop.api.supervisor.status',
      'stream triad.shop.event.web.*',
      'stream _INBOX.shop.web.>',
    ]);
    for (const i of web?.imports ?? []) expect(i.account).toBe('triad:shop');
    // Every publish the identity may make goes to an import (its account holds nothing else) …
    const client = byName('client-web');
    for (const p of client.nats.publish.filter((x) => !x.startsWith('$JS.'))) expect(imports, p).toContain(`service ${p}`);
    // … and the namespace's account exports each client's own subjects to that client only.
    for (const e of triad?.exports ?? []) {
      if (e.subject.includes('.web.') || e.subject.endsWith('.web')) expect(e.accounts).toEqual(['triad:shop:client:web']);
      if (e.subject.includes('.app.') || e.subject.endsWith('.app')) expect(e.accounts).toEqual(['triad:shop:client:app']);
    }
    expect(triad?.exports.find((e) => e.subject === 'triad.shop.api.workflow.list')?.accounts).toEqual(['triad:shop:client:web', 'triad:shop:client:app']);
    expect(app?.imports.some((i) => i.subject.includes('.web'))).toBe(false);
  });

  it('account names cannot collide across namespaces (":" is in no namespace or name)', () => {
    expect(triadAccountName('a-client-b')).not.toBe(clientAccountName('a', 'b'));
  });
});

describe('Redis ACL', () => {
  it("each role's command list holds every command its Lua scripts call", () => {
    for (const role of ['scheduler', 'supervisor'] as const) {
      const used = new Set(REDIS_ROLE_SCRIPTS[role].flatMap((s) => [...luaCommands(s)]));
      const listed = new Set<string>(REDIS_SCRIPT_COMMANDS[role]);
      // Redlock's acquire/extend/release scripts (exists, set, get, del) hold the supervisors' leadership lease (decision 0004).
      if (role === 'supervisor') for (const c of ['exists', 'set', 'get', 'del']) used.add(c);
      expect([...listed].sort(), role).toEqual([...used].sort());
      const id = byName(role);
      for (const c of used) expect(id.redis?.commands, `${role} ${c}`).toContain(c);
    }
  });

  it('grants no SELECT, or only the database their REDIS_URL names (decision 0022)', () => {
    for (const role of ['scheduler', 'supervisor']) expect(byName(role).redis?.commands.filter((c) => c.startsWith('select'))).toEqual([]);
    const inDb2 = deploymentIdentities({ namespace: 'shop', agents: ['payment'], redisDb: 2 });
    for (const role of ['scheduler', 'supervisor']) {
      const r = inDb2.find((i) => i.name === role)?.redis;
      expect(r?.commands.filter((c) => c.startsWith('select'))).toEqual(['select|2']);
      expect(redisAclLine(role, 'ab'.repeat(32), r!)).toContain(' +select|2');
    }
  });

  it('confines the scheduler and supervisor to their namespace and to no pub/sub channel', () => {
    const line = redisAclLine('scheduler-shop', 'ab'.repeat(32), byName('scheduler').redis!);
    expect(line).toMatch(/^user scheduler-shop reset on #(ab){32} ~triad:shop:\* resetchannels -@all \+/);
    expect(line).not.toContain('+@');
    expect(line).not.toContain('flushall');
    expect(line).not.toContain(' +keys');
  });
});
