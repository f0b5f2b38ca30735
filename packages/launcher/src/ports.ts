/** Free TCP ports on the loopback interface, and whether something listens on a port. */
import { connect, createServer, type Server } from 'node:net';

/** A port nobody listens on at this instant (it can still be taken before you bind it: retry on EADDRINUSE). */
export async function freePort(): Promise<number> {
  const [port] = await freePorts(1);
  if (port === undefined) throw new Error('freePorts(1) returned no port');
  return port;
}

/**
 * `count` distinct free ports. All listeners are held open together before any is closed, because
 * asking one at a time may hand back the same port twice.
 */
export async function freePorts(count: number): Promise<number[]> {
  const servers: Server[] = [];
  try {
    for (let i = 0; i < count; i++) servers.push(await listenOnAnyPort());
    return servers.map((server) => {
      const address = server.address();
      if (address === null || typeof address === 'string') throw new Error('unexpected listener address');
      return address.port;
    });
  } finally {
    await Promise.all(servers.map((server) => new Promise<void>((resolve) => server.close(() => resolve()))));
  }
}

function listenOnAnyPort(): Promise<Server> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.once('error', reject);
    server.listen({ host: '127.0.0.1', port: 0, exclusive: true }, () => resolve(server));
  });
}

/**
 * Whether this process could listen on host:port right now (nothing else has it bound). Like freePort,
 * an answer for this instant only: whoever binds it later must still handle EADDRINUSE.
 */
export function canListen(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.unref();
    server.once('error', () => resolve(false));
    server.listen({ host, port, exclusive: true }, () => server.close(() => resolve(true)));
  });
}

/** Whether something accepts a TCP connection at host:port within `timeoutMs`. */
export function listening(host: string, port: number, timeoutMs = 500): Promise<boolean> {
  return new Promise((resolve) => {
    const s = connect({ host, port });
    const done = (ok: boolean): void => {
      s.destroy();
      resolve(ok);
    };
    s.setTimeout(timeoutMs, () => done(false));
    s.once('connect', () => done(true));
    s.once('error', () => done(false));
  });
}

export interface WaitListeningOptions {
  host: string;
  port: number;
  /** For messages: the server's name. */
  name: string;
  /** Why the server can no longer come up (e.g. "exited with code 1"), or undefined while it runs. */
  exited(): string | undefined;
  /** Where to look when it fails (e.g. "; see .triad/logs/nats-server.log", or its last output). */
  detail(): string;
  timeoutMs?: number;
}

/** Polls until the server started for `host:port` listens; fails as soon as it exits, or after the timeout. */
export async function waitListening(o: WaitListeningOptions): Promise<void> {
  const timeoutMs = o.timeoutMs ?? 10_000;
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const gone = o.exited();
    if (gone !== undefined) throw new Error(`${o.name} ${gone}${o.detail()}`);
    if (await listening(o.host, o.port)) return;
    if (Date.now() >= deadline) throw new Error(`${o.name} did not listen on ${o.host}:${o.port} within ${timeoutMs / 1000} s${o.detail()}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}
