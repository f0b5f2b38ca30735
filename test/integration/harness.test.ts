/**
 * Proves the test harness against real processes: nats-server, redis-server and node children,
 * including the faults (kill, pause, restart) and the clean-up guarantees the other suites rely on.
 * Nothing here asserts how long anything takes; every wait is bounded by the harness itself.
 */
import { existsSync, readFileSync, statSync } from 'node:fs';
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { createServer, type Server } from 'node:net';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { afterAll, describe, expect, it } from 'vitest';
import { ManagedServer, MAX_START_ATTEMPTS } from '../harness/server.js';
import {
  freePort,
  freePorts,
  HarnessTimeoutError,
  natsInfo,
  natsRequest,
  RedisReplyError,
  redisCommand,
  redisReply,
  findBinary,
  requireBinary,
  startNats,
  startProcess,
  startRedis,
  Teardown,
  uniqueNamespace,
  waitFor,
  withTeardown,
} from '../harness/index.js';

const td = withTeardown(afterAll);

describe('binaries, ports and names', () => {
  it('resolves both server binaries to executables', () => {
    for (const name of ['nats-server', 'redis-server'] as const) {
      const path = requireBinary(name);
      expect(path.endsWith(`/${name}`)).toBe(true);
      expect(statSync(path).isFile()).toBe(true);
    }
  });

  it('says how to install a missing binary', () => {
    expect(() => findBinary('nats-server', ['/nonexistent'])).toThrow(/apt-get install -y nats-server/);
    expect(() => findBinary('nats-server', ['/nonexistent'])).toThrow(/github\.com\/nats-io\/nats-server\/releases/);
    expect(() => findBinary('redis-server', [])).toThrow(/apt-get install -y redis-server/);
  });

  it('hands out distinct free ports', async () => {
    const ports = [...(await freePorts(3)), await freePort()];
    for (const port of ports) expect(port).toBeGreaterThan(0);
    expect(new Set(ports.slice(0, 3)).size).toBe(3);
  });

  it('makes valid namespaces that never repeat', () => {
    const names = Array.from({ length: 1000 }, () => uniqueNamespace('orders'));
    for (const name of names) expect(name).toMatch(/^[A-Za-z0-9_-]{1,40}$/);
    expect(new Set(names).size).toBe(names.length);
    expect(uniqueNamespace()).toMatch(/^t_/);
    expect(() => uniqueNamespace('a'.repeat(40))).toThrow(RangeError);
    expect(() => uniqueNamespace('has.dot')).toThrow(RangeError);
  });
});

describe('startNats', () => {
  it('starts a JetStream server that answers INFO', async () => {
    const nats = await startNats({ teardown: td });
    expect(nats.url).toBe(`nats://127.0.0.1:${nats.port}`);
    const info = await natsInfo(nats.url);
    expect(info.server_name).toBe(nats.serverName);
    expect(info.port).toBe(nats.port);
    expect(info.jetstream).toBe(true);
    expect(nats.pid()).toEqual(expect.any(Number));
    expect(nats.log()).toContain('Server is ready');
  });

  it('keeps its port and JetStream store across restart() and kill()', async () => {
    const nats = await startNats({ teardown: td });
    const stream = uniqueNamespace('S');
    const created = JSON.parse(
      await natsRequest(
        nats.url,
        `$JS.API.STREAM.CREATE.${stream}`,
        JSON.stringify({ name: stream, subjects: [`${stream}.>`], storage: 'file' }),
      ),
    ) as { error?: unknown };
    expect(created.error).toBeUndefined();
    expect(JSON.parse(await natsRequest(nats.url, `${stream}.hello`, 'first'))).toMatchObject({ stream, seq: 1 });

    // A graceful restart flushes the store, so the message count below does not depend on flush timing.
    await nats.restart();
    expect(await streamMessages(nats.url, stream)).toBe(1);

    const pidBeforeCrash = nats.pid();
    await nats.kill();
    expect(nats.pid()).toBeUndefined();
    await expect(natsInfo(nats.url, { timeoutMs: 1_000 })).rejects.toThrow();

    await nats.restart();
    expect(nats.pid()).toEqual(expect.any(Number));
    expect(nats.pid()).not.toBe(pidBeforeCrash);
    expect((await natsInfo(nats.url)).port).toBe(nats.port);
    expect(statSync(join(nats.dataDir, 'jetstream')).isDirectory()).toBe(true);
    expect(await streamMessages(nats.url, stream)).toBe(1);
  });

  it('starts without JetStream when asked', async () => {
    const nats = await startNats({ jetstream: false, teardown: td });
    expect((await natsInfo(nats.url)).jetstream ?? false).toBe(false);
  });

  it('stops idempotently, removes its data dir, and refuses to restart afterwards', async () => {
    const nats = await startNats({ teardown: td });
    await nats.stop();
    await nats.stop();
    expect(nats.pid()).toBeUndefined();
    expect(existsSync(nats.dataDir)).toBe(false);
    await expect(nats.restart()).rejects.toThrow(/was stopped/);
    expect(() => nats.pause()).toThrow(/not running/);
  });
});

describe('startRedis', () => {
  it('pause() makes PING time out and resume() brings PONG back', async () => {
    const redis = await startRedis({ teardown: td });
    expect(redis.url).toBe(`redis://127.0.0.1:${redis.port}`);
    expect(await redisCommand(redis.url, 'PING')).toBe('+PONG');

    redis.pause();
    await expect(redisReply(redis.url, ['PING'], { timeoutMs: 500 })).rejects.toBeInstanceOf(HarnessTimeoutError);

    redis.resume();
    expect(await redisCommand(redis.url, 'PING')).toBe('+PONG');
  });

  it('keeps keys across restart() and across kill() + restart() with AOF', async () => {
    const redis = await startRedis({ teardown: td });
    const ns = uniqueNamespace('aof');
    expect(await redisCommand(redis.url, 'SET', `${ns}:graceful`, 'kept')).toBe('+OK');
    await redis.restart();
    expect(await redisCommand(redis.url, 'GET', `${ns}:graceful`)).toBe('kept');

    // appendfsync always: an acknowledged write is on disk before the reply, so even SIGKILL keeps it.
    expect(await redisCommand(redis.url, 'SET', `${ns}:crash`, 'kept too')).toBe('+OK');
    await redis.kill();
    expect(redis.pid()).toBeUndefined();
    await redis.restart();
    expect(await redisCommand(redis.url, 'GET', `${ns}:crash`)).toBe('kept too');
    expect(await redisCommand(redis.url, 'GET', `${ns}:missing`)).toBe('$-1');
    expect(existsSync(join(redis.dir, 'appendonlydir'))).toBe(true);
  });

  it('reports replies raw through redisCommand and decoded through redisReply', async () => {
    const redis = await startRedis({ aof: false, teardown: td });
    const ns = uniqueNamespace('resp');
    expect(await redisCommand(redis.url, 'INCRBY', `${ns}:n`, 41)).toBe(':41');
    expect(await redisCommand(redis.url, 'SET', `${ns}:unicode`, 'héllo ✓')).toBe('+OK');
    expect(await redisCommand(redis.url, 'GET', `${ns}:unicode`)).toBe('héllo ✓');
    expect(await redisCommand(redis.url, 'NO-SUCH-COMMAND')).toMatch(/^-ERR/);
    await expect(redisReply(redis.url, ['NO-SUCH-COMMAND'])).rejects.toBeInstanceOf(RedisReplyError);
    await expect(redisCommand(redis.url, 'KEYS', `${ns}:*`)).rejects.toThrow(/use redisReply/);
    const keys = (await redisReply(redis.url, ['KEYS', `${ns}:*`])) as string[];
    expect(keys.sort()).toEqual([`${ns}:n`, `${ns}:unicode`]);
    expect(await redisReply(redis.url, ['CONFIG', 'GET', 'appendonly'])).toEqual(['appendonly', 'no']);
  });
});

describe('port collisions', () => {
  /** A redis-server definition whose ports come from `ports()`, to force collisions on purpose. */
  async function redisOn(ports: () => Promise<number>): Promise<ManagedServer<{ port: number }>> {
    const dir = await mkdtemp(join(tmpdir(), 'triad-redis-'));
    const server = new ManagedServer<{ port: number }>(
      {
        kind: 'redis-server',
        binary: requireBinary('redis-server'),
        readyTimeoutMs: 20_000,
        allocatePorts: async () => ({ port: await ports() }),
        args: ({ port }, serverDir) => ['--port', String(port), '--bind', '127.0.0.1', '--dir', serverDir, '--save', ''],
        probe: async ({ port }) => (await redisReply(`redis://127.0.0.1:${port}`, ['PING'], { timeoutMs: 1_000 })) === 'PONG',
      },
      dir,
    );
    td.add(() => server.stop());
    return server;
  }

  it('starts on a fresh port when the first one is taken before the server binds it', async () => {
    const blocker = await occupy(0);
    const offered: number[] = [];
    const server = await redisOn(async () => {
      const port = offered.length === 0 ? blocker.port : await freePort();
      offered.push(port);
      return port;
    });
    await server.start();
    expect(offered).toHaveLength(2);
    expect(server.ports.port).toBe(offered[1]);
    expect(server.log()).toMatch(/address already in use/i);
  });

  it(`gives up after ${MAX_START_ATTEMPTS} attempts when every port is taken`, async () => {
    const blocker = await occupy(0);
    let offered = 0;
    const server = await redisOn(() => {
      offered += 1;
      return Promise.resolve(blocker.port);
    });
    await expect(server.start()).rejects.toThrow(new RegExp(`attempt ${MAX_START_ATTEMPTS} \\(ports`));
    expect(offered).toBe(MAX_START_ATTEMPTS);
    await server.stop();
    expect(existsSync(server.dir)).toBe(false);
  });

  it('restart() keeps its port: it fails clearly while the port is taken, and works once it is free', async () => {
    const redis = await startRedis({ aof: false, teardown: td });
    await redis.kill();
    const blocker = await occupy(redis.port);
    await expect(redis.restart()).rejects.toThrow(/failed to restart[\s\S]*address already in use/i);
    await closeServer(blocker.server);
    await redis.restart();
    expect(await redisCommand(redis.url, 'PING')).toBe('+PONG');
  });
});

describe('startProcess', () => {
  it('waits for readyPattern, captures output and kills', async () => {
    const script = `
      console.log('booting as ' + process.env.HARNESS_GREETING);
      console.error('warming up on stderr');
      setTimeout(() => console.log('ready on port 4242'), 20);
      setInterval(() => {}, 1000);
    `;
    const actor = await startProcess({
      name: 'ready-script',
      args: ['-e', script],
      env: { HARNESS_GREETING: 'hello' },
      readyPattern: /ready on port (\d+)/,
      teardown: td,
    });
    expect(actor.pid).toEqual(expect.any(Number));
    expect(actor.output()).toContain('booting as hello');
    expect(actor.output()).toContain('warming up on stderr');
    expect(await actor.waitForOutput(/ready on port/g)).toBe('ready on port 4242');

    await actor.kill();
    expect(await actor.exited).toBeNull();
    await expect(actor.waitForOutput(/never printed/)).rejects.toThrow(/exited with signal SIGKILL/);
  });

  it('rejects waitForOutput with the output tail when the process exits', async () => {
    const actor = await startProcess({
      name: 'failing-script',
      args: ['-e', `console.log('about to fail'); setTimeout(() => process.exit(3), 20);`],
      teardown: td,
    });
    const waiting = actor.waitForOutput(/never printed/);
    await expect(waiting).rejects.toThrow(/exited with code 3[\s\S]*about to fail/);
    expect(await actor.exited).toBe(3);
  });

  it('rejects waitForOutput on timeout with the output tail', async () => {
    const actor = await startProcess({
      name: 'quiet-script',
      args: ['-e', `console.log('only line'); setInterval(() => {}, 1000);`],
      readyPattern: /only line/,
      teardown: td,
    });
    const waiting = actor.waitForOutput(/never printed/, 200);
    await expect(waiting).rejects.toBeInstanceOf(HarnessTimeoutError);
    await expect(waiting).rejects.toThrow(/timed out after 200ms[\s\S]*only line/);
    await actor.stop();
  });

  it('fails to start when the process exits before readyPattern', async () => {
    await expect(
      startProcess({
        name: 'early-exit',
        args: ['-e', `console.error('missing config'); process.exit(2);`],
        readyPattern: /ready/,
        teardown: td,
      }),
    ).rejects.toThrow(/early-exit did not become ready[\s\S]*code 2[\s\S]*missing config/);
  });

  it('stop() ends a paused process gracefully (SIGTERM is delivered after SIGCONT)', async () => {
    const actor = await startProcess({
      name: 'graceful-script',
      args: [
        '-e',
        `process.on('SIGTERM', () => { console.log('graceful'); process.exit(0); });
         console.log('up');
         setInterval(() => {}, 1000);`,
      ],
      readyPattern: /^up$/,
      teardown: td,
    });
    actor.pause();
    await actor.stop();
    expect(await actor.exited).toBe(0);
    expect(actor.output()).toContain('graceful');
  });

  it('registers in the teardown before readiness, so a teardown during setup stops the process', async () => {
    const local = new CountingTeardown();
    const starting = startProcess({
      name: 'never-ready',
      args: ['-e', 'setInterval(() => {}, 1000);'],
      readyPattern: /never printed/,
      teardown: local,
    });
    await waitFor(() => local.added === 1, { timeoutMs: 10_000, what: 'startProcess to register its teardown' });
    await local.run();
    await expect(starting).rejects.toThrow(/never-ready did not become ready[\s\S]*exited with signal SIGTERM/);
  });
});

describe('waitFor', () => {
  it('times out with the message', async () => {
    await expect(waitFor(() => false, { timeoutMs: 200, what: 'the moon' })).rejects.toThrow(
      'timed out after 200ms waiting for the moon',
    );
  });

  it('reports the last error', async () => {
    let attempt = 0;
    const waiting = waitFor(
      () => {
        attempt += 1;
        throw new Error(`not yet (${attempt})`);
      },
      { timeoutMs: 200, intervalMs: 10, what: 'a probe' },
    );
    await expect(waiting).rejects.toBeInstanceOf(HarnessTimeoutError);
    await expect(waiting).rejects.toThrow(/waiting for a probe \(last error: not yet \(\d+\)\)/);
  });

  it('says what the awaited state last looked like, even when describing it throws', async () => {
    let polls = 0;
    await expect(
      waitFor(() => ++polls > 1_000_000, { timeoutMs: 200, intervalMs: 10, what: 'a million polls', lastSeen: () => `${polls} polls` }),
    ).rejects.toThrow(/waiting for a million polls; last seen: \d+ polls$/);
    await expect(
      waitFor(() => false, { timeoutMs: 100, what: 'nothing', lastSeen: () => { throw new Error('no state'); } }),
    ).rejects.toThrow('waiting for nothing; last seen: (not describable: no state)');
  });

  it('stays bounded when the condition never settles', async () => {
    await expect(
      waitFor(() => new Promise<boolean>(() => {}), { timeoutMs: 200, what: 'a hung probe' }),
    ).rejects.toThrow('timed out after 200ms waiting for a hung probe');
  });

  it('resolves with the first value that is not undefined or false', async () => {
    let calls = 0;
    const value = await waitFor(() => (++calls < 3 ? undefined : 0), { timeoutMs: 10_000, intervalMs: 1, what: 'a zero' });
    expect(value).toBe(0);
    expect(calls).toBe(3);
  });
});

describe('Teardown', () => {
  it('runs every step in reverse order and reports all failures together', async () => {
    const local = new Teardown();
    const ran: string[] = [];
    local.add(() => {
      ran.push('first');
    });
    local.add(() => {
      ran.push('second');
      throw new Error('second broke');
    });
    local.add(() => {
      ran.push('third');
      return Promise.reject(new Error('third broke'));
    });
    const error: unknown = await local.run().catch((e: unknown) => e);
    expect(ran).toEqual(['third', 'second', 'first']);
    expect(error).toBeInstanceOf(AggregateError);
    expect((error as AggregateError).errors).toHaveLength(2);
    expect((error as AggregateError).message).toMatch(/2 of 3 step\(s\) failed: third broke; second broke/);
    await local.run(); // emptied: a second run has nothing to do
  });
});

describe('crash safety', () => {
  // The harness is compiled to plain ESM so a separate node process can use it the way a vitest worker does.
  let harnessJs: string | undefined;
  async function compiledHarness(): Promise<string> {
    if (harnessJs !== undefined) return harnessJs;
    const source = fileURLToPath(new URL('../harness/', import.meta.url));
    // Inside the repository, so its imports of workspace packages (@triad/launcher) resolve.
    const scratch = fileURLToPath(new URL('../../.triad/', import.meta.url));
    await mkdir(scratch, { recursive: true });
    const out = await mkdtemp(join(scratch, 'harness-js-'));
    td.add(() => rm(out, { recursive: true, force: true }));
    await writeFile(join(out, 'package.json'), '{ "type": "module" }\n');
    for (const file of await readdir(source)) {
      if (!file.endsWith('.ts')) continue;
      const { outputText } = ts.transpileModule(await readFile(join(source, file), 'utf8'), {
        compilerOptions: { module: ts.ModuleKind.ES2022, target: ts.ScriptTarget.ES2022, verbatimModuleSyntax: true },
      });
      await writeFile(join(out, file.replace(/\.ts$/, '.js')), outputText);
    }
    harnessJs = join(out, 'index.js');
    return harnessJs;
  }

  it.each([
    ['exits normally', 'process.exit(0);', 'SIGUSR2'],
    ['throws', `throw new Error('worker crashed');`, 'SIGUSR2'],
    ['is sent SIGTERM (as vitest stops workers)', '', 'SIGTERM'],
    ['is SIGKILLed', '', 'SIGKILL'],
  ] as const)('kills its servers and removes their dirs when the worker %s', async (_, onUsr2, signal) => {
    const harness = await compiledHarness();
    // The worker ends only when told, so the test sees its server running first.
    const script = `
      const { startRedis } = await import(${JSON.stringify(harness)});
      const redis = await startRedis();
      process.on('SIGUSR2', () => { ${onUsr2} });
      setInterval(() => {}, 1000);
      console.log(JSON.stringify({ pid: redis.pid(), dir: redis.dir }));
    `;
    const worker = await startProcess({
      name: 'worker',
      args: ['--input-type=module', '-e', script],
      readyPattern: /^\{"pid"/,
      teardown: td,
    });
    const started = JSON.parse(await worker.waitForOutput(/^\{"pid"/)) as { pid: number; dir: string };
    expect(isAlive(started.pid)).toBe(true);
    expect(existsSync(started.dir)).toBe(true);
    if (signal === 'SIGUSR2') worker.signal(signal);
    else await worker.kill(signal);
    await worker.exited;
    await waitFor(() => !isAlive(started.pid), { timeoutMs: 10_000, what: `redis-server pid ${started.pid} to die` });
    await waitFor(() => !existsSync(started.dir), { timeoutMs: 10_000, what: `${started.dir} to be removed` });
  });
});

/** Listens on `port` (0: any) and drops every connection, like an unrelated service holding the port. */
async function occupy(port: number): Promise<{ server: Server; port: number }> {
  const server = createServer((socket) => socket.destroy());
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen({ host: '127.0.0.1', port }, () => resolve());
  });
  td.add(() => closeServer(server));
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('unexpected listener address');
  return { server, port: address.port };
}

function closeServer(server: Server): Promise<void> {
  return new Promise((resolve) => {
    if (!server.listening) resolve();
    else server.close(() => resolve());
  });
}

/** A Teardown that counts registrations, to see when a start has registered itself. */
class CountingTeardown extends Teardown {
  added = 0;

  override add(step: () => Promise<void> | void): void {
    this.added += 1;
    super.add(step);
  }
}

/** Messages in a JetStream stream, read through the JetStream API. */
async function streamMessages(url: string, stream: string): Promise<number> {
  const reply = JSON.parse(await natsRequest(url, `$JS.API.STREAM.INFO.${stream}`)) as {
    state?: { messages?: number };
    error?: unknown;
  };
  if (reply.error !== undefined) throw new Error(`STREAM.INFO ${stream}: ${JSON.stringify(reply.error)}`);
  return reply.state?.messages ?? -1;
}

/**
 * Whether `pid` still runs. An orphan that was killed may stay a zombie when PID 1 does not reap
 * (as in many containers), so a zombie counts as dead: it holds no port and runs no code.
 */
function isAlive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const state = stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
    return state !== 'Z' && state !== 'X';
  } catch {
    if (existsSync('/proc/self/stat')) return false;
  }
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}
