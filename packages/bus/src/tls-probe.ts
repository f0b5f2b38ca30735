/**
 * Looks into a NATS connection attempt that timed out. When a server refuses a client certificate (or
 * the lack of one) after a TLS 1.3 handshake, nats.js sees no error, only a timeout — which a service
 * would retry forever. One plain look at the server's INFO and one TLS handshake with our settings tell
 * the two apart.
 */
import { isIP, connect as netConnect, type Socket } from 'node:net';
import { connect as tlsConnect, type TLSSocket } from 'node:tls';
import type { TlsOptions } from '@nats-io/nats-core';

const PROBE_TIMEOUT_MS = 3_000;
/** How long after the handshake to wait for the server's alert (it comes right after our certificate). */
const ALERT_WAIT_MS = 1_000;

/** The part of nats-server's INFO that says what TLS it wants. */
interface TlsInfo {
  tls_required?: boolean;
  tls_available?: boolean;
  tls_verify?: boolean;
}

function hostPort(server: string): { host: string; port: number } {
  const u = new URL(/^[a-z]+:\/\//i.test(server) ? server : `nats://${server}`);
  return { host: u.hostname.replace(/^\[|\]$/g, ''), port: u.port === '' ? 4222 : Number(u.port) };
}

function readInfo(socket: Socket): Promise<TlsInfo> {
  return new Promise((resolve, reject) => {
    let buffered = '';
    const onData = (chunk: Buffer): void => {
      buffered += chunk.toString('utf8');
      const end = buffered.indexOf('\r\n');
      if (end === -1) return;
      socket.off('data', onData);
      const line = buffered.slice(0, end);
      if (!line.startsWith('INFO ')) return reject(new Error(`not a NATS server (it opened with ${JSON.stringify(line.slice(0, 40))})`));
      try {
        resolve(JSON.parse(line.slice(5)) as TlsInfo);
      } catch (e) {
        reject(e instanceof Error ? e : new Error(String(e)));
      }
    };
    socket.on('data', onData);
    socket.once('error', reject);
    socket.once('close', () => reject(new Error('closed before INFO')));
  });
}

/** A TLS handshake on `socket`; resolves with the error the server's alert caused, or undefined if none came. */
function handshake(socket: Socket, host: string, tls: TlsOptions): Promise<Error | undefined> {
  return new Promise((resolve) => {
    let timer: NodeJS.Timeout | undefined;
    const secure: TLSSocket = tlsConnect(
      {
        socket,
        ...(isIP(host) === 0 ? { servername: host } : {}),
        ...(tls.ca !== undefined ? { ca: tls.ca } : {}),
        ...(tls.cert !== undefined ? { cert: tls.cert } : {}),
        ...(tls.key !== undefined ? { key: tls.key } : {}),
      },
      () => {
        timer = setTimeout(() => done(undefined), ALERT_WAIT_MS);
      },
    );
    const done = (e: Error | undefined): void => {
      clearTimeout(timer);
      secure.destroy();
      resolve(e);
    };
    secure.once('error', (e: Error) => done(e));
    secure.once('close', () => done(undefined));
  });
}

/**
 * What a server says to a client with these TLS settings: an Error carrying the TLS code (e.g.
 * ERR_SSL_TLSV13_ALERT_CERTIFICATE_REQUIRED) when it refuses the handshake, else undefined (the
 * timeout had another cause, or the server cannot be reached: retrying may help).
 */
export async function probeTls(server: string, tls: TlsOptions | undefined): Promise<Error | undefined> {
  let host: string;
  let port: number;
  try {
    ({ host, port } = hostPort(server));
  } catch {
    return undefined;
  }
  const socket = netConnect({ host, port });
  const timer = setTimeout(() => socket.destroy(new Error('probe timed out')), PROBE_TIMEOUT_MS);
  try {
    const info = await readInfo(socket);
    const wantsTls = info.tls_required === true || (info.tls_available === true && tls !== undefined);
    if (!wantsTls) return undefined;
    if (info.tls_verify === true && (tls?.cert === undefined || tls.key === undefined)) {
      return Object.assign(new Error('the server verifies client certificates (tls_verify) and none is configured'), { code: 'ERR_SSL_TLSV13_ALERT_CERTIFICATE_REQUIRED' });
    }
    return await handshake(socket, host, tls ?? {});
  } catch {
    return undefined;
  } finally {
    clearTimeout(timer);
    socket.destroy();
  }
}
