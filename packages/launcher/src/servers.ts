/**
 * The one place nats-server and redis-server are composed: their command lines (every caller's flags —
 * npm start's, the bench's, the test harness's, the store tests' — built here) and a plain start on
 * free loopback ports that waits until the server listens. Callers with more to do (the harness's
 * restartable servers, npm start's reaped children with log files) use the argument builders with their
 * own process management.
 */
import { requireBinary, type BinaryPurpose } from './binaries.js';
import { freePorts, waitListening } from './ports.js';
import { startProcess, type StartedProcess } from './process.js';

export interface NatsServerArgs {
  /** Client (and monitoring) host; default 127.0.0.1. */
  host?: string;
  port: number;
  /** HTTP monitoring port (/varz, /jsz, /healthz); none when absent. */
  monitorPort?: number;
  /** A configuration file (users, accounts, TLS); the flags here win over it. */
  configFile?: string;
  /** --server_name; with a configuration file, put it in the file (a reload refuses to drop a flag's). */
  serverName?: string;
  /** JetStream's store directory; JetStream is enabled when given, unless `jetstream` is false. */
  storeDir?: string;
  jetstream?: boolean;
  /** More arguments (e.g. a cluster's `--cluster` and `--routes`). */
  extra?: readonly string[];
}

/** nats-server's arguments. `-a` also binds the monitoring listener: nothing listens beyond `host`. */
export function natsServerArgs(o: NatsServerArgs): string[] {
  return [
    ...(o.configFile !== undefined ? ['-c', o.configFile] : []),
    '-a', o.host ?? '127.0.0.1',
    '-p', String(o.port),
    ...(o.monitorPort !== undefined ? ['-m', String(o.monitorPort)] : []),
    ...(o.serverName !== undefined ? ['--server_name', o.serverName] : []),
    ...(o.storeDir !== undefined ? ['-sd', o.storeDir, ...(o.jetstream === false ? [] : ['-js'])] : []),
    ...(o.extra ?? []),
  ];
}

export interface RedisServerArgs {
  /** Default 127.0.0.1. */
  host?: string;
  port: number;
  dir: string;
  /** Append-only file: 'always' fsyncs every write (a SIGKILL loses nothing acknowledged); default none. */
  aof?: false | 'everysec' | 'always';
  /** --requirepass: the default user's password. */
  password?: string;
  /** --aclfile: users, one per line. */
  aclFile?: string;
  /** TLS only on `port` (the plain port closed); clients need not send a certificate. */
  tls?: { certFile: string; keyFile: string; caFile: string };
  /** More arguments (e.g. `--cluster-enabled yes`). */
  extra?: readonly string[];
}

/** redis-server's arguments: RDB snapshots off (`--save ''`), in the foreground. */
export function redisServerArgs(o: RedisServerArgs): string[] {
  const aof = o.aof ?? false;
  return [
    ...(o.tls === undefined
      ? ['--port', String(o.port)]
      : ['--port', '0', '--tls-port', String(o.port), '--tls-cert-file', o.tls.certFile, '--tls-key-file', o.tls.keyFile, '--tls-ca-cert-file', o.tls.caFile, '--tls-auth-clients', 'no']),
    '--bind', o.host ?? '127.0.0.1',
    '--dir', o.dir,
    '--save', '',
    '--appendonly', aof ? 'yes' : 'no',
    ...(aof ? ['--appendfsync', aof] : []),
    '--daemonize', 'no',
    ...(o.password !== undefined ? ['--requirepass', o.password] : []),
    ...(o.aclFile !== undefined ? ['--aclfile', o.aclFile] : []),
    ...(o.extra ?? []),
  ];
}

/** A server started here on free loopback ports. */
export interface LaunchedServer {
  readonly url: string;
  readonly port: number;
  readonly process: StartedProcess;
  stop(): Promise<void>;
}

export interface LaunchedNats extends LaunchedServer {
  /** http://127.0.0.1:PORT, when started with `monitor`. */
  readonly monitorUrl?: string;
}

/** Until the child listens on 127.0.0.1:port; fails with its last output if it exits first or never does. */
async function listeningOrStopped(c: StartedProcess, port: number): Promise<void> {
  try {
    await waitListening({ host: '127.0.0.1', port, name: c.name, exited: () => (c.isRunning() ? undefined : 'exited during start-up'), detail: () => `; last output:\n${c.tail()}` });
  } catch (e) {
    await c.stop();
    throw e;
  }
}

/** A port can be taken between asking and binding: a start is tried a few times. */
async function withFreshPorts<T>(count: number, start: (ports: number[]) => Promise<T>): Promise<T> {
  const failures: string[] = [];
  for (let attempt = 1; attempt <= 3; attempt++) {
    const ports = await freePorts(count);
    try {
      return await start(ports);
    } catch (e) {
      failures.push(e instanceof Error ? e.message : String(e));
    }
  }
  throw new Error(`the server did not start in 3 tries:\n${failures.join('\n')}`);
}

/** nats-server on free loopback ports, JetStream on with its store in `storeDir`. */
export function startNatsServer(o: { storeDir: string; monitor?: boolean; name?: string; purpose?: BinaryPurpose }): Promise<LaunchedNats> {
  const binary = requireBinary('nats-server', o.purpose);
  return withFreshPorts(o.monitor ? 2 : 1, async ([port = 0, monitorPort]) => {
    const p = await startProcess({ name: o.name ?? 'nats-server', command: binary, args: natsServerArgs({ port, storeDir: o.storeDir, ...(o.monitor ? { monitorPort } : {}) }) });
    await listeningOrStopped(p, port);
    return { url: `nats://127.0.0.1:${port}`, port, process: p, stop: () => p.stop(), ...(o.monitor ? { monitorUrl: `http://127.0.0.1:${monitorPort}` } : {}) };
  });
}

/** redis-server on a free loopback port, its files in `dir` (no persistence unless `aof`). */
export function startRedisServer(o: { dir: string; aof?: RedisServerArgs['aof']; name?: string; purpose?: BinaryPurpose }): Promise<LaunchedServer> {
  const binary = requireBinary('redis-server', o.purpose);
  return withFreshPorts(1, async ([port = 0]) => {
    const p = await startProcess({ name: o.name ?? `redis-server :${port}`, command: binary, args: redisServerArgs({ port, dir: o.dir, ...(o.aof ? { aof: o.aof } : {}) }) });
    await listeningOrStopped(p, port);
    return { url: `redis://127.0.0.1:${port}`, port, process: p, stop: () => p.stop() };
  });
}
