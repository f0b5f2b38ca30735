import { spawnSync } from 'node:child_process';
import { EventEmitter } from 'node:events';
import { existsSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { beforeAll, describe, it, expect } from 'vitest';
import { CommanderError, InvalidArgumentError } from 'commander';
import type { TriadClient } from '@triad/client';
import { ErrorCode, TriadError, type StepState, type TaskEvent, type TaskState } from '@triad/protocol';
import { clock, completeByText, duration, eventLine, finalLine, isoTime, relative, stepDetail, stepsTable, summaryTable, table, taskHeader, taskJson, truncate, when } from '../src/format.js';
import { CliError, INPUT_EXAMPLE, TASK_STATUSES, intArg, parseJson, parseStatus, taskInput } from '../src/io.js';
import { errorLines, exitCodeOf } from '../src/errors.js';
import { resolveConnection } from '../src/runtime.js';
import { followTask } from '../src/follow.js';
import { priorityArg } from '../src/commands/submit.js';

const here = dirname(fileURLToPath(import.meta.url));
const repo = resolve(here, '../../..');
const bin = resolve(here, '../bin/triad.js');

function thrown(fn: () => unknown): unknown {
  try {
    fn();
  } catch (e) {
    return e;
  }
  throw new Error('expected a throw');
}

const step = (over: Partial<StepState> = {}): StepState => ({
  name: 'charge',
  agent: 'payments',
  status: 'processing',
  attempt: 2,
  failureCount: 1,
  dependsOn: [],
  ...over,
});

const task = (over: Partial<TaskState> = {}): TaskState => ({
  taskId: 't1',
  workflow: 'orders',
  version: 3,
  status: 'running',
  input: {},
  lockEpoch: 4,
  seq: 2,
  createdAt: 1_000,
  updatedAt: 2_000,
  steps: [step()],
  ...over,
});

describe('JSON input', () => {
  it('parses valid JSON', () => {
    expect(parseJson('{"orderId":"o1","amount":42}', '--input')).toEqual({ orderId: 'o1', amount: 42 });
    expect(parseJson(' [1, 2] ', '--input')).toEqual([1, 2]);
  });

  it('quotes the parse error and shows an example, with exit code 2', () => {
    const e = thrown(() => parseJson('{bad', '--input'));
    expect(e).toBeInstanceOf(CliError);
    const ce = e as CliError;
    expect(ce.exitCode).toBe(2);
    expect(ce.message).toMatch(/^--input is not valid JSON: .+/);
    let native = '';
    try {
      JSON.parse('{bad');
    } catch (x) {
      native = (x as Error).message;
    }
    expect(ce.message).toContain(native);
    expect(ce.details).toEqual([`example: ${INPUT_EXAMPLE}`]);
    expect(INPUT_EXAMPLE).toBe(`--input '{"orderId":"o1","amount":42}'`);
  });

  it('rejects empty input', () => {
    expect((thrown(() => parseJson('  ', '--input')) as CliError).message).toBe('--input is empty; expected JSON');
  });

  it('takes --input or --input-file, not both, and defaults to {}', () => {
    expect(taskInput({})).toEqual({});
    expect(taskInput({ input: '{"a":1}' })).toEqual({ a: 1 });
    expect(taskInput({ inputFile: 'in.json' }, () => '{"b":2}')).toEqual({ b: 2 });
    const both = thrown(() => taskInput({ input: '{}', inputFile: 'x' })) as CliError;
    expect(both.exitCode).toBe(2);
    expect(both.message).toMatch(/not both/);
    const badFile = thrown(() => taskInput({ inputFile: 'in.json' }, () => 'nope')) as CliError;
    expect(badFile.message).toMatch(/^--input-file in.json is not valid JSON/);
  });

  it('reports a missing input file as a usage error', () => {
    const e = thrown(() => taskInput({ inputFile: '/definitely/not/here.json' })) as CliError;
    expect(e.exitCode).toBe(2);
    expect(e.message).toBe('cannot read --input-file /definitely/not/here.json: no such file');
  });
});

describe('option parsing', () => {
  it('validates --status against the task statuses', () => {
    expect(parseStatus('failed')).toBe('failed');
    expect(TASK_STATUSES).toContain('compensation_failed');
    const e = thrown(() => parseStatus('done'));
    expect(e).toBeInstanceOf(InvalidArgumentError);
    expect((e as Error).message).toBe(`"done" is not a task status; use one of: ${TASK_STATUSES.join(', ')}.`);
  });

  it('parses whole numbers in a range', () => {
    expect(intArg(1)('42')).toBe(42);
    expect(intArg(1, 100)('100')).toBe(100);
    for (const bad of ['0', '-1', '1.5', 'abc', '', '101', '1e3']) {
      expect(() => intArg(1, 100)(bad)).toThrow(InvalidArgumentError);
    }
    expect(() => intArg(1)('0')).toThrow('Expected a whole number of at least 1, got "0".');
  });

  it('checks --priority before sending, in the protocol\'s words', () => {
    expect(priorityArg('1')).toBe(1);
    expect(priorityArg('5')).toBe(5);
    for (const bad of ['0', '6', '2.5', 'high', '']) {
      expect(() => priorityArg(bad)).toThrow(`--priority: expected a whole number from 1 (highest) to 5 (lowest), got "${bad}".`);
    }
  });

  it('resolves the connection from flags over the environment', () => {
    expect(resolveConnection({}, {})).toEqual({ natsUrl: 'nats://127.0.0.1:4222', namespace: 'default', clientId: 'default', requestTimeoutMs: 10_000, client: { labels: {} } });
    const env = { NATS_URL: 'nats://env:4222', TRIAD_NAMESPACE: 'envns', TRIAD_CLIENT_ID: 'env-client' };
    expect(resolveConnection({}, env)).toMatchObject({ natsUrl: 'nats://env:4222', namespace: 'envns', clientId: 'env-client' });
    expect(resolveConnection({ nats: 'nats://flag:4222', namespace: 'flagns', clientId: 'flag-client', requestTimeout: 500 }, env)).toMatchObject({
      natsUrl: 'nats://flag:4222',
      namespace: 'flagns',
      clientId: 'flag-client',
      requestTimeoutMs: 500,
    });
    expect(exitCodeOf(thrown(() => resolveConnection({ clientId: 'a.b' }, {})))).toBe(2);
    const bad = thrown(() => resolveConnection({ namespace: 'a.b' }, {})) as CliError;
    expect(bad.exitCode).toBe(2);
    expect(bad.message).toMatch(/^--namespace "a.b" is invalid/);
    expect(exitCodeOf(thrown(() => resolveConnection({}, { TRIAD_NAMESPACE: 'a b' })))).toBe(2);
  });
});

describe('NATS credentials and TLS flags', () => {
  it('take the environment, and each flag overrides its variable', () => {
    const env = { NATS_CREDS: '/env.creds', NATS_TLS_CA: '/env-ca.pem' };
    expect(resolveConnection({}, env).client).toMatchObject({ creds: '/env.creds', tlsCa: '/env-ca.pem' });
    expect(resolveConnection({ natsCreds: '/flag.creds', natsTlsCa: '/flag-ca.pem' }, env).client).toMatchObject({ creds: '/flag.creds', tlsCa: '/flag-ca.pem' });
    expect(resolveConnection({ natsTlsCert: '/c.pem', natsTlsKey: '/k.pem' }, {}).client).toMatchObject({ tlsCert: '/c.pem', tlsKey: '/k.pem' });
  });

  it('an auth flag replaces the environment auth method; --nats-user takes NATS_PASSWORD from the environment', () => {
    const token = resolveConnection({ natsToken: 'flag-token' }, { NATS_CREDS: '/env.creds', NATS_USER: 'u', NATS_PASSWORD: 'p' }).client;
    expect(token).toMatchObject({ token: 'flag-token' });
    expect(token.creds).toBeUndefined();
    expect(token.user).toBeUndefined();
    const user = resolveConnection({ natsUser: 'alice' }, { NATS_PASSWORD: 'from-env', NATS_NKEY_SEED: '/seed' }).client;
    expect(user).toMatchObject({ user: 'alice', password: 'from-env' });
    expect(user.nkeySeed).toBeUndefined();
  });

  it('are refused naming the flag: two auth methods, a user without a password, a certificate without a key', () => {
    const two = thrown(() => resolveConnection({ natsCreds: '/a.creds', natsToken: 't' }, {})) as TriadError;
    expect(two.code).toBe(ErrorCode.InvalidConfig);
    expect(two.message).toContain('--nats-creds and --nats-token are both set: a NATS connection uses exactly one auth method');
    expect(exitCodeOf(two)).toBe(2);
    expect((thrown(() => resolveConnection({ natsUser: 'alice' }, {})) as TriadError).message).toContain('--nats-user is set but NATS_PASSWORD is not');
    expect((thrown(() => resolveConnection({ natsTlsCert: '/c.pem' }, {})) as TriadError).message).toContain('--nats-tls-cert is set but NATS_TLS_KEY is not');
    expect((thrown(() => resolveConnection({ natsCreds: '' }, {})) as TriadError).message).toContain('--nats-creds is set but empty');
  });
});

describe('errors', () => {
  it('prints the message and each detail indented, without repeating the details', () => {
    const e = new TriadError(ErrorCode.InvalidDefinition, 'workflow "w" is invalid (2 problems): a is bad; b is bad', { details: ['a is bad', 'b is bad'] });
    expect(errorLines(e)).toEqual(['triad: workflow "w" is invalid (2 problems):', '  a is bad', '  b is bad']);
    expect(errorLines(new Error('boom'))).toEqual(['triad: boom']);
    expect(errorLines(new CliError('x', { details: ['unrelated'] }))).toEqual(['triad: x', '  unrelated']);
  });

  it('maps errors to exit codes: 2 for input errors, 1 for operational ones', () => {
    expect(exitCodeOf(new TriadError(ErrorCode.InvalidDefinition, 'x'))).toBe(2);
    expect(exitCodeOf(new TriadError(ErrorCode.InvalidMessage, 'x'))).toBe(2);
    expect(exitCodeOf(new TriadError(ErrorCode.UnknownTask, 'x'))).toBe(1);
    expect(exitCodeOf(new TriadError(ErrorCode.Unavailable, 'x'))).toBe(1);
    expect(exitCodeOf(new CliError('x', { exitCode: 2 }))).toBe(2);
    expect(exitCodeOf(new CommanderError(1, 'commander.unknownOption', 'x'))).toBe(2);
    expect(exitCodeOf(new CommanderError(0, 'commander.helpDisplayed', 'x'))).toBe(0);
    expect(exitCodeOf(new Error('x'))).toBe(1);
  });
});

describe('formatting', () => {
  it('pads table columns, shows empty cells as "-" and leaves no trailing spaces', () => {
    const t = table(['NAME', 'N', 'NOTE'], [
      ['orders', 1, undefined],
      ['a', 12345, 'multi\nline'],
    ]);
    expect(t.split('\n')).toEqual(['NAME    N      NOTE', 'orders  1      -', 'a       12345  multi line']);
    expect(table(['A', 'B'], [['x', '']])).toBe('A  B\nx  -');
  });

  it('formats clock times with milliseconds (local time)', () => {
    expect(clock(new Date(2024, 0, 2, 3, 4, 5, 6).getTime())).toBe('03:04:05.006');
    expect(clock(new Date(2024, 0, 2, 23, 59, 59, 999).getTime())).toBe('23:59:59.999');
  });

  it('formats ISO, durations and relative times', () => {
    expect(isoTime(Date.UTC(2024, 0, 2, 3, 4, 5, 6))).toBe('2024-01-02T03:04:05.006Z');
    expect(isoTime(undefined)).toBe('-');
    expect(duration(420)).toBe('420ms');
    expect(duration(4_249)).toBe('4.2s');
    expect(duration(59_999)).toBe('59.9s');
    expect(duration(192_000)).toBe('3m12s');
    expect(duration(2 * 3_600_000 + 5 * 60_000)).toBe('2h05m');
    expect(duration(3 * 86_400_000 + 4 * 3_600_000)).toBe('3d4h');
    expect(relative(14_200, 10_000)).toBe('in 4.2s');
    expect(relative(10_000, 13_100)).toBe('3.1s ago');
    expect(relative(10_010, 10_000)).toBe('now');
    expect(when(Date.UTC(2024, 0, 1), Date.UTC(2024, 0, 1) - 4_200)).toBe('2024-01-01T00:00:00.000Z (in 4.2s)');
    expect(when(undefined)).toBe('-');
    expect(truncate('abcdef', 4)).toBe('abc…');
    expect(truncate('abc', 4)).toBe('abc');
  });

  it('formats event lines', () => {
    const at = new Date(2024, 0, 2, 3, 4, 5, 6).getTime();
    const ev: TaskEvent = { taskId: 't1', seq: 5, type: 'step_failed', step: 'charge', attempt: 2, at, reason: 'card declined' };
    expect(eventLine(ev)).toBe('03:04:05.006  #5    step_failed           charge attempt 2  card declined');
    expect(eventLine({ taskId: 't1', seq: 12, type: 'completed', status: 'completed', at })).toBe('03:04:05.006  #12   completed');
    expect(eventLine({ taskId: 't1', seq: 3, type: 'step_sleeping', step: 'cool-off', at, until: new Date(2024, 0, 2, 3, 5, 0).getTime() })).toBe('03:04:05.006  #3    step_sleeping         cool-off  until 03:05:00');
  });

  it('shows an event type and a step status this version does not know as they are (protocol §9)', () => {
    const at = new Date(2024, 0, 2, 3, 4, 5, 6).getTime();
    expect(eventLine({ taskId: 't1', seq: 6, type: 'step_napping', step: 'cool-off', at })).toBe('03:04:05.006  #6    step_napping          cool-off');
    const rows = stepsTable([step({ name: 'approval', status: 'waiting_for_godot' })], Date.UTC(2024, 0, 1)).split('\n');
    expect(rows[1]).toMatch(/^approval\s+\S+\s+waiting_for_godot\s/);
  });

  it("shows why a step was skipped (decision 0019): status's DETAIL column, the summary, the JSON", () => {
    const skipped = step({ name: 'approval', status: 'skipped', attempt: 0, failureCount: 0, reason: 'amount 10 is not > 1000' });
    const rows = stepsTable([skipped], Date.UTC(2024, 0, 1)).split('\n');
    expect(rows[0]).toMatch(/\s+DONE #\s+DETAIL$/);
    expect(rows[1]).toMatch(/^approval\s+payments\s+skipped\s+0\s+.*\s+skipped: amount 10 is not > 1000$/);
    expect(summaryTable([skipped]).split('\n')[1]).toMatch(/skipped: amount 10 is not > 1000$/);
    expect((taskJson(task({ steps: [skipped] }))['steps'] as Record<string, unknown>[])[0]).toMatchObject({ status: 'skipped', reason: 'amount 10 is not > 1000', error: null });
    expect(stepDetail({ status: 'processed' })).toBeUndefined();
    expect(stepDetail({ status: 'processing', items: { count: 10, pending: 4, running: 2, done: 3, failed: 1 } })).toBe('elements 3 done, 2 running, 1 failed, 4 pending of 10');
    expect(stepDetail({ status: 'processed', items: { count: 0, pending: 0, running: 0, done: 0, failed: 0 } })).toBe('elements none of 0');
    const now = new Date(2024, 0, 2, 12, 0, 0).getTime();
    expect(stepDetail({ status: 'sleeping', until: new Date(2024, 0, 2, 12, 3, 0).getTime() }, now)).toBe('sleeping until 12:03:00 (in 3m00s)');
    expect(stepDetail({ status: 'sleeping', until: now + 1_200 }, now)).toBe('sleeping until 12:00:01 (in 1.2s)');
  });

  it('shows the task header and the steps table with the complete-by time relative while in flight', () => {
    const now = Date.UTC(2024, 0, 1);
    const t = task({ lockedBy: 'scheduler-1', createdAt: now - 3_100, updatedAt: now - 1_000, error: 'boom', steps: [step({ completeBy: now + 4_200, lockedBy: 'agent-1' }), step({ name: 'ship', status: 'processed', completeBy: now - 500, failureCount: 0 })] });
    const header = taskHeader(t, now).split('\n');
    expect(header).toContain('task:        t1');
    expect(header).toContain('workflow:    orders@3');
    expect(header).toContain('lock epoch:  4');
    expect(header).toContain('created:     2023-12-31T23:59:56.900Z (3.1s ago)');
    expect(header).toContain('error:       boom');
    expect(header.some((l) => l.startsWith('finished'))).toBe(false);
    expect(header.some((l) => l.startsWith('priority'))).toBe(false);
    expect(taskHeader({ ...t, priority: 1 }, now).split('\n')).toContain('priority:    1 (1 highest … 5 lowest; 3 by default)');
    const rows = stepsTable(t.steps, now).split('\n');
    expect(rows[0]).toMatch(/^STEP\s+AGENT\s+STATUS\s+ATTEMPT\s+LOCKED BY\s+COMPLETE BY\s+FAILURES\s+DONE #\s+DETAIL$/);
    expect(rows[1]).toContain('2024-01-01T00:00:04.200Z (in 4.2s)');
    // A step being compensated shows its compensation: the undo agent, its attempt, holder and deadline.
    const undo = stepsTable([step({ status: 'compensating', order: 2, compensation: { agent: 'refunds', attempt: 1, failureCount: 0, lockedBy: 'agent-9', completeBy: now + 1_500 } })], now).split('\n')[1];
    expect(undo).toMatch(/refunds \(undo\)\s+compensating\s+1\s+agent-9\s+.*\(in 1\.5s\)\s+0\s+2/);
    expect(rows[1]).toContain('agent-1');
    expect(rows[2]).toContain('2023-12-31T23:59:59.500Z');
    expect(rows[2]).not.toContain('ago');
    expect(completeByText({ status: 'processing', completeBy: now - 3_100 }, now)).toBe('2023-12-31T23:59:56.900Z (3.1s ago)');
    expect(completeByText({ status: 'pending' }, now)).toBe('-');
  });

  it('says when a task record was compacted by retention, instead of an empty lock', () => {
    const now = Date.UTC(2024, 0, 1);
    const header = taskHeader(task({ status: 'completed', lockEpoch: 0, createdAt: now - 3_100, updatedAt: now - 1_000, finishedAt: now - 1_000, compacted: true }), now).split('\n');
    expect(header.some((l) => l.startsWith('locked by') || l.startsWith('lock epoch'))).toBe(false);
    expect(header.find((l) => l.startsWith('record:'))).toMatch(/compacted by retention/);
    expect(header).toContain('finished:  2023-12-31T23:59:59.000Z (1.0s ago)');
  });

  it('builds the JSON outcome with every step field present', () => {
    const j = taskJson(task({ status: 'completed', finishedAt: 3_000, steps: [step({ status: 'processed', output: { id: 1 }, startedAt: 1_000, finishedAt: 2_000 })] }));
    expect(Object.keys(j)).toEqual(['taskId', 'status', 'workflow', 'version', 'steps', 'error']);
    expect(j['steps']).toEqual([
      { name: 'charge', agent: 'payments', status: 'processed', attempt: 2, failureCount: 1, lockedBy: null, completeBy: null, startedAt: 1_000, finishedAt: 2_000, output: { id: 1 }, error: null, reason: null },
    ]);
    expect(finalLine(task({ status: 'failed', finishedAt: 2_200, error: 'x' }))).toBe('task t1 failed (orders@3, took 1.2s): x');
    // A fan-out step's element counts, and a step's kind where it is not an agent call, when there are any.
    const fanned = taskJson(task({ steps: [step({ status: 'processed', items: { count: 2, pending: 0, running: 0, done: 2, failed: 0 } }), step({ name: 'approval', kind: 'signal', status: 'skipped' })] }));
    expect((fanned['steps'] as Record<string, unknown>[]).map((x) => [x['items'], x['kind']])).toEqual([[{ count: 2, pending: 0, running: 0, done: 2, failed: 0 }, undefined], [undefined, 'signal']]);
  });
});

describe('following a task', () => {
  const ev = (seq: number, type: TaskEvent['type']): TaskEvent => ({ taskId: 't1', seq, type, at: 1_000 + seq });
  /** A client whose watch yields `events`, then (unless `end`) hangs until aborted — or for ever with `deaf`. */
  function fakeClient(events: TaskEvent[], o: { end?: boolean; deaf?: boolean; state?: TaskState } = {}): TriadClient {
    return {
      namespace: 'ns',
      async *watch(_id: string, w: { signal?: AbortSignal } = {}) {
        for (const e of events) yield e;
        if (o.end) return;
        await new Promise<void>((res) => {
          if (!o.deaf) w.signal?.addEventListener('abort', () => res(), { once: true });
        });
      },
      getTask: () => Promise.resolve(o.state ?? task({ status: "completed" })),
    } as unknown as TriadClient;
  }

  it('reports every event and the final state when the task ends', async () => {
    const seen: number[] = [];
    const end = await followTask(fakeClient([ev(1, 'received'), ev(2, 'completed')], { end: true }), 't1', { onEvent: (e) => seen.push(e.seq) });
    expect(seen).toEqual([1, 2]);
    expect(end).toEqual({ kind: 'ended', state: task({ status: 'completed' }), missed: 0 });
  });

  it('ends by the task\'s state when its last events never come (a NATS failover lost them), counting the missed ones', async () => {
    // The watch saw #1 and #2, then nothing: the task's state says it completed at #5.
    const seen: number[] = [];
    const state = task({ status: 'completed', seq: 5 });
    const end = await followTask(fakeClient([ev(1, 'received'), ev(2, 'step_started')], { state }), 't1', { onEvent: (e) => seen.push(e.seq) });
    expect(seen).toEqual([1, 2]);
    expect(end).toEqual({ kind: 'ended', state, missed: 3 });
  });

  it('reports a rejection', async () => {
    const end = await followTask(fakeClient([ev(0, 'rejected')], { end: true }), 't1');
    expect(end.kind).toBe('rejected');
  });

  it('gives up at the time limit, even if the watch ignores the abort', async () => {
    expect(await followTask(fakeClient([ev(1, 'received')]), 't1', { timeoutMs: 50 })).toEqual({ kind: 'timeout' });
    expect(await followTask(fakeClient([], { deaf: true }), 't1', { timeoutMs: 50 })).toEqual({ kind: 'timeout' });
  });

  it('stops after the idle limit (a task whose events aged out, or an unknown one)', async () => {
    expect(await followTask(fakeClient([]), 't1', { idleMs: 50 })).toEqual({ kind: 'idle', sawEvents: false });
    expect(await followTask(fakeClient([ev(1, 'received')]), 't1', { idleMs: 50 })).toEqual({ kind: 'idle', sawEvents: true });
    // Only the first event is waited for with a limit: after it, the task is followed until the time limit.
    expect(await followTask(fakeClient([ev(1, 'received')]), 't1', { idleMs: 20, idleUntilFirstEvent: true, timeoutMs: 150 })).toEqual({ kind: 'timeout' });
  });

  it('stops on Ctrl-C and removes its handler', async () => {
    const signals = new EventEmitter();
    const p = followTask(fakeClient([ev(1, 'received')]), 't1', { signals: signals as unknown as NodeJS.Process });
    await expect.poll(() => signals.listenerCount('SIGINT'), { timeout: 10_000, interval: 5, message: 'followTask to install its SIGINT handler' }).toBe(1);
    signals.emit('SIGINT');
    expect(await p).toEqual({ kind: 'interrupted' });
    expect(signals.listenerCount('SIGINT')).toBe(0);
  });
});

describe('the triad executable', () => {
  beforeAll(() => {
    if (!existsSync(resolve(here, '../dist/main.js'))) throw new Error('apps/cli is not built: run "npx tsc -b apps/cli" first');
  });
  const triad = (...args: string[]) =>
    spawnSync(process.execPath, [bin, ...args], { cwd: repo, encoding: 'utf8', timeout: 20_000, env: { ...process.env, NO_COLOR: '1' } });

  it('prints help with examples and exits 0', () => {
    const r = triad('--help');
    expect(r.status).toBe(0);
    expect(r.stdout).toContain('Usage: triad');
    for (const c of ['submit', 'status', 'watch', 'list', 'workflows']) expect(r.stdout).toContain(c);
    const sub = triad('submit', '--help');
    expect(sub.status).toBe(0);
    expect(sub.stdout).toContain(`$ triad submit orders --input '{"orderId":"o1","amount":42}'`);
  });

  it('rejects invalid --input JSON with exit code 2 before connecting', () => {
    const r = triad('submit', 'orders', '--input', '{bad', '--nats', 'nats://127.0.0.1:1');
    expect(r.status).toBe(2);
    expect(r.stdout).toBe('');
    expect(r.stderr).toMatch(/^triad: --input is not valid JSON: /);
    expect(r.stderr).toContain(`example: --input '{"orderId":"o1","amount":42}'`);
    expect(r.stderr).not.toMatch(/\n\s+at /);
  });

  it('exits 2 on usage errors with a triad: message', () => {
    const r = triad('list', '--status', 'done');
    expect(r.status).toBe(2);
    expect(r.stderr).toContain('triad: option');
    expect(r.stderr).toContain('use one of: running, completed');
    expect(triad('frobnicate').status).toBe(2);
  });
});

describe('workflows show', () => {
  it('prints each step with the longest time it can take before it escalates, and the task bound', async () => {
    const { describeBounds } = await import('../src/bounds-text.js');
    const { taskBound, validateDefinition } = await import('@triad/core');
    const def = validateDefinition({
      name: 'orders',
      onFailure: 'compensate',
      defaults: { ladder: { retries: 1, longBackoffMs: 1_000, maxFailures: 3, maxCircuitOpen: 2 } },
      steps: [
        { name: 'reserve', agent: 'inventory', budgetMs: 2_000, compensate: { agent: 'inventory', budgetMs: 1_000 } },
        { name: 'ship', agent: 'shipping', budgetMs: 2_000, dependsOn: ['reserve'], giveUpAfterMs: 5_000 },
      ],
    });
    const wf = { ...def, version: 4, registeredAt: 0 };
    const s = { sweepIntervalMs: 1_000, leaderLeaseMs: 5_000 };
    const text = describeBounds(wf, taskBound(wf, s), s).split('\n');
    expect(text[0]).toBe('orders v4');
    expect(text[1]).toBe('on failure: compensate');
    // reserve: give-up = (3 + 2)·2s + (1 + 2)·1s = 13s, bound 13s + 2s; its undo (5·1s + 3·1s) + 1s;
    // ship: 5s + 2s; 3 + 1 + 2 = 6 sweeps each.
    expect(text.find((l) => l.startsWith('reserve'))).toMatch(/^reserve\s+inventory\s+2s\s+1\/1s\/3\/2\s+15s \+ 6 sweeps \(≤ 21s\)\s+inventory 1s\s+9s \+ 6 sweeps \(≤ 15s\)$/);
    expect(text.find((l) => l.startsWith('ship'))).toMatch(/^ship\s+shipping\s+2s\s+1\/1s\/3\/2\s+7s \+ 6 sweeps \(≤ 13s\)\s+-\s+-$/);
    // run 15s + 7s (12 sweeps), undo 2s + 9s (7 sweeps), a leader change 5s.
    expect(text.find((l) => l.startsWith('a task ends within'))).toBe('a task ends within 38s + 19 sweeps (≤ 57s):');
  });

  it('shows what a sleep, a wait, a fan-out and a child step take, and the conditions (decision 0019)', async () => {
    const { childResolver, describeBounds } = await import('../src/bounds-text.js');
    const { taskBound, validateDefinition } = await import('@triad/core');
    const ladder = { retries: 1, longBackoffMs: 1_000, maxFailures: 2, maxCircuitOpen: 0 };
    const shipment = { ...validateDefinition({ name: 'shipment', defaults: { ladder }, steps: [{ name: 'label', agent: 'shipping', budgetMs: 1_000 }] }), version: 2, registeredAt: 0 };
    const def = validateDefinition({
      name: 'approved',
      defaults: { ladder },
      steps: [
        { name: 'reserve', agent: 'inventory', budgetMs: 2_000 },
        { name: 'cool-off', sleep: { ms: 3_000 } },
        { name: 'approval', waitFor: { signal: 'approved', timeoutMs: 10_000 }, dependsOn: ['reserve', 'cool-off'], when: { input: 'amount', gt: 1000 } },
        { name: 'ship', agent: 'shipping', budgetMs: 1_000, dependsOn: ['approval'], forEach: 'items', maxItems: 4, maxParallel: 2, compensate: { agent: 'shipping', budgetMs: 1_000 } },
        { name: 'ship-all', child: { workflow: 'shipment' }, dependsOn: ['ship'] },
      ],
    });
    const wf = { ...def, version: 1, registeredAt: 0 };
    const s = { sweepIntervalMs: 1_000, leaderLeaseMs: 5_000 };
    const asked: string[] = [];
    const children = await childResolver(wf, (name, version) => {
      asked.push(`${name}@${version ?? 'latest'}`);
      return Promise.resolve(name === 'shipment' ? shipment : undefined);
    });
    expect(asked).toEqual(['shipment@latest']);
    const text = describeBounds(wf, taskBound(wf, s, children), s).split('\n');
    expect(text.find((l) => l.startsWith('cool-off'))).toMatch(/^cool-off\s+sleep\s+3s\s+-\s+3s \+ 1 sweep \(≤ 4s\)\s+-\s+-$/);
    expect(text.find((l) => l.startsWith('approval'))).toMatch(/^approval\s+waitFor signal approved\s+timeout 10s\s+-\s+10s \+ 1 sweep \(≤ 11s\)\s+-\s+-$/);
    // Two waves of 2 items: 2 × (2 attempts of 1 s + 1 s), 2 × 2 sweeps.
    expect(text.find((l) => l.startsWith('ship '))).toMatch(/^ship\s+shipping forEach items \(≤ 4 items, 2 at once\)\s+1s\s+1\/1s\/2\/0\s+6s \+ 4 sweeps \(≤ 10s\)\s+shipping 1s per item\s+6s \+ 4 sweeps \(≤ 10s\)$/);
    expect(text.find((l) => l.startsWith('ship-all'))).toMatch(/^ship-all\s+child shipment\s+-\s+-\s+\S.* \+ \d+ sweeps \(≤ .*\)\s+undo the child\s+\S.*$/);
    expect(text).toContain('  approval runs only when amount > 1000; else it is skipped');
    expect(text.some((l) => l.startsWith('a task ends within'))).toBe(true);

    // A child workflow that is not registered: the bound is unknown, and the text says why.
    const none = await childResolver(wf, () => Promise.resolve(undefined));
    const unknown = describeBounds(wf, taskBound(wf, s, none), s).split('\n');
    expect(unknown.find((l) => l.startsWith('ship-all'))).toMatch(/\bunknown\b/);
    expect(unknown).toContain("a task's bound is unknown:");
    expect(unknown).toContain('  step "ship-all" starts workflow "shipment", which is not registered: its bound is the child\'s own');
    expect(unknown.some((l) => l.startsWith('a task ends within'))).toBe(false);
  });
});
