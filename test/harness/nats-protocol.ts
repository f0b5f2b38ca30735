// Speaks just enough of the NATS client protocol to probe a server and make one request, with no client library.
import { randomBytes } from 'node:crypto';
import { exchange, hostAndPort } from './socket.js';

/** The INFO a NATS server sends first on every client connection (fields the harness relies on). */
export interface NatsServerInfo {
  server_id: string;
  server_name: string;
  version: string;
  port: number;
  jetstream?: boolean;
  [field: string]: unknown;
}

export interface NatsProtocolOptions {
  /** Whole conversation, connect included; default 5000 ms for requests, 2000 ms for INFO. */
  timeoutMs?: number;
}

/** Connects, reads the `INFO {…}` line the server opens with, and hangs up. */
export async function natsInfo(url: string, opts: NatsProtocolOptions = {}): Promise<NatsServerInfo> {
  const { host, port } = hostAndPort(url);
  return exchange({
    host,
    port,
    timeoutMs: opts.timeoutMs ?? 2_000,
    what: `the INFO line of ${url}`,
    parse: (received) => {
      const lineEnd = received.indexOf('\r\n');
      if (lineEnd === -1) return undefined;
      return parseInfo(received.toString('utf8', 0, lineEnd));
    },
  });
}

/**
 * Publishes `payload` to `subject` with a fresh inbox as reply subject and resolves with the first
 * reply's payload. Enough for JetStream API calls (`$JS.API.STREAM.INFO.<name>`) from a test.
 * Rejects on `-ERR` and on "no responders" (503), which NATS sends when nobody subscribes.
 */
export async function natsRequest(
  url: string,
  subject: string,
  payload = '',
  opts: NatsProtocolOptions = {},
): Promise<string> {
  const { host, port } = hostAndPort(url);
  const inbox = `_INBOX.harness.${randomBytes(8).toString('hex')}`;
  const body = Buffer.from(payload, 'utf8');
  let offset = 0;
  let sent = false;
  return exchange({
    host,
    port,
    timeoutMs: opts.timeoutMs ?? 5_000,
    what: `a reply on ${subject} from ${url}`,
    parse: (received, socket) => {
      for (;;) {
        const lineEnd = received.indexOf('\r\n', offset);
        if (lineEnd === -1) return undefined;
        const line = received.toString('utf8', offset, lineEnd);
        const [op = '', ...fields] = line.split(' ');
        switch (op.toUpperCase()) {
          case 'INFO':
            if (!sent) {
              sent = true;
              // Headers are needed for no_responders, which turns "nobody listens" into a fast 503 instead of a timeout.
              const connect = { verbose: false, pedantic: false, headers: true, no_responders: true, protocol: 1 };
              socket.write(
                Buffer.concat([
                  Buffer.from(
                    `CONNECT ${JSON.stringify(connect)}\r\nSUB ${inbox} 1\r\nPUB ${subject} ${inbox} ${body.length}\r\n`,
                  ),
                  body,
                  Buffer.from('\r\n'),
                ]),
              );
            }
            break;
          case 'PING':
            socket.write('PONG\r\n');
            break;
          case '-ERR':
            throw new Error(`NATS server rejected the request on ${subject}: ${line}`);
          case 'MSG': {
            // MSG <subject> <sid> [reply-to] <#bytes>
            const size = Number(fields[fields.length - 1]);
            const start = lineEnd + 2;
            if (received.length < start + size + 2) return undefined;
            return received.toString('utf8', start, start + size);
          }
          case 'HMSG': {
            // HMSG <subject> <sid> [reply-to] <#header bytes> <#total bytes>
            const headerSize = Number(fields[fields.length - 2]);
            const totalSize = Number(fields[fields.length - 1]);
            const start = lineEnd + 2;
            if (received.length < start + totalSize + 2) return undefined;
            const headers = received.toString('utf8', start, start + headerSize);
            const status = /^NATS\/1\.0 (\d{3})/.exec(headers)?.[1];
            if (status === '503') throw new Error(`no responders on ${subject} (${url})`);
            return received.toString('utf8', start + headerSize, start + totalSize);
          }
          default:
            // +OK, PONG: nothing to do.
            break;
        }
        offset = lineEnd + 2;
      }
    },
  });
}

function parseInfo(line: string): NatsServerInfo {
  if (!line.startsWith('INFO {')) throw new Error(`expected an INFO line from nats-server, got ${JSON.stringify(line.slice(0, 80))}`);
  const info = JSON.parse(line.slice('INFO '.length)) as NatsServerInfo;
  if (typeof info.server_id !== 'string') throw new Error(`INFO without server_id: ${line.slice(0, 200)}`);
  return info;
}
