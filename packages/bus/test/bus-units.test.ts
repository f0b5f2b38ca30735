// The bus's own pure logic: protocol headers and version refusal, the stream layout it asks JetStream
// for, its settings from the environment, how it classifies publish errors, and how payload references
// are found in a value.
import { describe, expect, it } from 'vitest';
import { headers } from '@nats-io/nats-core';
import { DiscardPolicy, RetentionPolicy } from '@nats-io/jetstream';
import { ErrorCode, names } from '@triad/protocol';
import {
  DEFAULT_SUBMIT_BACKLOG_PER_CLIENT,
  PROTOCOL_HEADER,
  isBacklogFull,
  isLeaderChange,
  protocolHeaders,
  resolveRefs,
  streamReplicas,
  streamSpecs,
  submitBacklogPerClient,
  unsupportedVersion,
  type Bus,
} from '../src/index.js';

describe('protocol headers', () => {
  it('every message says protocol 1; extra headers are added', () => {
    const h = protocolHeaders({ 'Nats-Msg-Id': 'x' });
    expect(h.get(PROTOCOL_HEADER)).toBe('1');
    expect(h.get('Nats-Msg-Id')).toBe('x');
  });

  it('a reader refuses another major version, saying which, and reads v1 or no header', () => {
    const withVersion = (v: string) => {
      const h = headers();
      h.set(PROTOCOL_HEADER, v);
      return h;
    };
    expect(unsupportedVersion(undefined)).toBeUndefined();
    expect(unsupportedVersion(withVersion('1'))).toBeUndefined();
    expect(unsupportedVersion(withVersion('1.4'))).toBeUndefined();
    expect(unsupportedVersion(withVersion('2'))).toMatch(/protocol "2".*speaks protocol 1/);
    expect(unsupportedVersion(withVersion('x'))).toMatch(/protocol "x"/);
  });
});

describe('stream layout', () => {
  const bus = { names: names('shop') } as Bus;

  it('work queues for submissions, steps, results and commands; time-limited logs for events, alerts and dead letters', () => {
    const specs = streamSpecs(bus, { submitBacklogPerClient: 7 });
    const byName = new Map(specs.map((s) => [s.name, s]));
    const n = bus.names.streams;
    for (const w of [n.submit, n.steps, n.results, n.commands]) expect(byName.get(w)?.retention).toBe(RetentionPolicy.Workqueue);
    for (const l of [n.events, n.alerts, n.deadLetters]) expect(byName.get(l)?.retention).toBe(RetentionPolicy.Limits);
    // Fair intake: a client's backlog is capped per subject and the newest is refused (decision 0022).
    expect(byName.get(n.submit)).toMatchObject({ discard: DiscardPolicy.New, max_msgs_per_subject: 7, discard_new_per_subject: true });
    // A dead letter has room for the message it carries and its reason.
    expect(byName.get(n.deadLetters)!.max_msg_size).toBeGreaterThan(byName.get(n.steps)!.max_msg_size);
  });
});

describe('settings from the environment', () => {
  it('TRIAD_STREAM_REPLICAS: 1 by default, 1 to 5, else refused naming the variable', () => {
    expect(streamReplicas({})).toBe(1);
    expect(streamReplicas({ TRIAD_STREAM_REPLICAS: '3' })).toBe(3);
    expect(() => streamReplicas({ TRIAD_STREAM_REPLICAS: '6' })).toThrow(expect.objectContaining({ code: ErrorCode.InvalidConfig, message: expect.stringContaining('TRIAD_STREAM_REPLICAS') }));
  });

  it('TRIAD_SUBMIT_BACKLOG_PER_CLIENT: the default, a whole number, else refused naming the variable', () => {
    expect(submitBacklogPerClient({})).toBe(DEFAULT_SUBMIT_BACKLOG_PER_CLIENT);
    expect(submitBacklogPerClient({ TRIAD_SUBMIT_BACKLOG_PER_CLIENT: '50' })).toBe(50);
    expect(() => submitBacklogPerClient({ TRIAD_SUBMIT_BACKLOG_PER_CLIENT: '1.5' })).toThrow(/TRIAD_SUBMIT_BACKLOG_PER_CLIENT/);
  });
});

describe('publish errors', () => {
  it('a JetStream leader change (503, no responders, timeout) is told apart from other errors, through causes', () => {
    const named = (name: string, message = name) => Object.assign(new Error(message), { name });
    expect(isLeaderChange(named('NoRespondersError'))).toBe(true);
    expect(isLeaderChange(new Error('wrapped', { cause: new Error('503 temporarily unavailable') }))).toBe(true);
    expect(isLeaderChange(new Error('maximum payload exceeded'))).toBe(false);
  });

  it('a full per-client backlog (JetStream 10077) is recognised by code or message', () => {
    expect(isBacklogFull(Object.assign(new Error('x'), { api_error: { err_code: 10077 } }))).toBe(true);
    expect(isBacklogFull(new Error('outer', { cause: new Error('maximum messages per subject exceeded') }))).toBe(true);
    expect(isBacklogFull(new Error('maximum payload exceeded'))).toBe(false);
  });
});

describe('payload references (resolveRefs)', () => {
  const ref = { $triad: 'object', v: 1, bucket: 'triad_2_ns_c1', name: 'n', size: 1, sha256: 'a'.repeat(64) };

  it('returns a value holding no reference as it is, without downloading', async () => {
    const downloads: unknown[] = [];
    const value = { a: [1, { b: 'x', c: new Uint8Array([1]) }, undefined, null], d: new Date(0) };
    expect(await resolveRefs(value, (r) => (downloads.push(r), Promise.resolve(new Uint8Array([0xc0]))))).toBe(value);
    expect(downloads).toEqual([]);
  });

  it('replaces a reference at any depth, and refuses an unknown Triad value', async () => {
    const value = { a: [1, { b: ref }], keep: 'k' };
    const out = await resolveRefs(value, () => Promise.resolve(new Uint8Array([0x2a])));
    expect(out).toEqual({ a: [1, { b: 42 }], keep: 'k' });
    await expect(resolveRefs([{ $triad: 'other' }], () => Promise.resolve(new Uint8Array([0xc0])))).rejects.toThrow(/unknown Triad value "other"/);
  });
});
