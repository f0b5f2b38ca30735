// The role table (decision 0010/0016) as data: each role reaches its own subjects and no other role's,
// namespaces share nothing, and the Redis command lists cover exactly what the Lua scripts call.
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import {
  CLIENT_SCOPED_OPS,
  REDIS_ROLE_SCRIPTS,
  REDIS_SCRIPT_COMMANDS,
  deploymentIdentities,
  names,
  redisAclLine,
  rolesAllowed,
  subjectMatches,
  type Identity,
} from '../src/index.js';

const LUA = join(dirname(fileURLToPath(import.meta.url)), '../../store/lua');

function luaCommands(script: string): Set<string> {
  const text = readFileSync(join(LUA, `${script}.lua`), 'utf8');
  const all = text.includes('--@include _common') ? text + readFileSync(join(LUA, '_common.lua'), 'utf8') : text;
  return new Set([...all.matchAll(/redis\.p?call\(\s*['"]([A-Za-z]+)['"]/g)].map((m) => (m[1] ?? '').toLowerCase()));
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

  it('a client submits under its own id, reads only, and watches only its own events', () => {
    const web = byName('client-web');
    expect(may(web, 'publish', n.subjects.submit('web'))).toBe(true);
    expect(may(web, 'publish', n.subjects.submit('operator'))).toBe(false);
    for (const op of ['task.cancel', 'task.retry', 'workflow.register', 'alert.list'] as const) expect(may(web, 'publish', n.subjects.api(op)), op).toBe(false);
    for (const op of ['workflow.get', 'workflow.list', 'supervisor.status'] as const) expect(may(web, 'publish', n.subjects.api(op)), op).toBe(true);
    expect(may(web, 'publish', n.subjects.result('payment'))).toBe(false);
    expect(may(web, 'publish', `$JS.API.CONSUMER.CREATE.${n.streams.events}.oc_1.${n.subjects.event('web', 't1')}`)).toBe(true);
    expect(may(web, 'publish', `$JS.API.CONSUMER.CREATE.${n.streams.events}.oc_1.${n.subjects.event('other', 't1')}`)).toBe(false);
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
    ]);
    // The scheduler hears them on its API subscription.
    expect(may(byName('scheduler'), 'subscribe', n.subjects.clientApi('web', 'task.get'))).toBe(true);
  });

  it('the operator may cancel, retry, register and read alerts and dead letters', () => {
    const op = byName('operator');
    for (const o of ['task.cancel', 'task.retry', 'workflow.register', 'alert.list', 'task.get', 'task.list'] as const) expect(may(op, 'publish', n.subjects.api(o))).toBe(true);
    expect(may(op, 'publish', n.subjects.clientApi('web', 'task.get'))).toBe(true);
    expect(may(op, 'publish', `$JS.API.CONSUMER.CREATE.${n.streams.deadLetters}.oc_1.triad.shop.dlq.>`)).toBe(true);
    expect(may(op, 'publish', n.subjects.result('payment'))).toBe(false);
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
    expect(rolesAllowed('shop', 'publish', n.subjects.submit('web'))).toEqual(['client "web"']);
    expect(rolesAllowed('shop', 'publish', 'triad.other.api.task.get')).toEqual([]);
    expect(rolesAllowed('shop', 'publish', n.subjects.api('task.get'))).toEqual(['operator']);
    expect(rolesAllowed('shop', 'publish', n.subjects.clientApi('web', 'task.list'))).toEqual(['operator', 'client "web"']);
  });
});

describe('Redis ACL', () => {
  it("each role's command list holds every command its Lua scripts call", () => {
    for (const role of ['scheduler', 'supervisor'] as const) {
      const used = new Set(REDIS_ROLE_SCRIPTS[role].flatMap((s) => [...luaCommands(s)]));
      const listed = new Set<string>(REDIS_SCRIPT_COMMANDS[role]);
      // Redlock's acquire/extend/release scripts (exists, set, get, del) run as the scheduler.
      if (role === 'scheduler') for (const c of ['exists', 'set', 'get', 'del']) used.add(c);
      expect([...listed].sort(), role).toEqual([...used].sort());
      const id = byName(role);
      for (const c of used) expect(id.redis?.commands, `${role} ${c}`).toContain(c);
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
