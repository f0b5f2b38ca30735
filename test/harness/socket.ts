// One short TCP (or TLS) conversation with a deadline: connect, send, read until the reply is complete, hang up.
import { connect, type Socket } from 'node:net';
import { connect as tlsConnect } from 'node:tls';
import { HarnessTimeoutError, messageOf } from './errors.js';

export interface ExchangeOptions<T> {
  host: string;
  port: number;
  /** Bounds the whole conversation, connect included: a SIGSTOPped server accepts but never answers. */
  timeoutMs: number;
  /** Names the conversation in errors: "timed out after 500ms waiting for <what>". */
  what: string;
  /** Written as soon as the connection is up; omit when the server speaks first. */
  request?: string | Buffer;
  /** Speak TLS from the first byte, trusting this CA (PEM); the server is not asked for a client certificate. */
  tls?: { ca: string };
  /** Sees every byte received so far; returns the result once complete, `undefined` to keep reading. May write, may throw. */
  parse(received: Buffer, socket: Socket): T | undefined;
}

export function exchange<T>(opts: ExchangeOptions<T>): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    let received = Buffer.alloc(0);
    let settled = false;
    const socket = opts.tls === undefined ? connect({ host: opts.host, port: opts.port }) : tlsConnect({ host: opts.host, port: opts.port, ca: opts.tls.ca });
    const finish = (error: Error | undefined, value?: T): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.destroy();
      if (error !== undefined) reject(error);
      else resolve(value as T);
    };
    const timer = setTimeout(() => {
      finish(new HarnessTimeoutError(`timed out after ${opts.timeoutMs}ms waiting for ${opts.what}`));
    }, opts.timeoutMs);
    socket.once(opts.tls === undefined ? 'connect' : 'secureConnect', () => {
      if (opts.request !== undefined) socket.write(opts.request);
    });
    socket.on('data', (chunk: Buffer) => {
      received = Buffer.concat([received, chunk]);
      try {
        const result = opts.parse(received, socket);
        if (result !== undefined) finish(undefined, result);
      } catch (error) {
        finish(error instanceof Error ? error : new Error(messageOf(error)));
      }
    });
    socket.once('error', (error) => finish(new Error(`${opts.what}: ${error.message}`, { cause: error })));
    socket.once('close', () => finish(new Error(`${opts.what}: connection closed before a complete reply`)));
  });
}

/** Host and port of `scheme://host:port` (the harness only ever hands out such URLs). */
export function hostAndPort(url: string): { host: string; port: number } {
  const parsed = new URL(url);
  const port = Number(parsed.port);
  if (parsed.hostname === '' || !Number.isInteger(port) || port <= 0) {
    throw new Error(`expected a URL with an explicit host and port, got ${JSON.stringify(url)}`);
  }
  return { host: parsed.hostname, port };
}
