// Talks to Redis over raw RESP2, one command per connection, so tests can probe a server without a client library.
import { RedisReplyError } from './errors.js';
import { exchange, hostAndPort } from './socket.js';

/** A decoded RESP2 reply; nested error replies (e.g. inside EXEC) stay values, a top-level one rejects. */
export type RespValue = string | number | null | RedisReplyError | RespValue[];

export interface RedisCommandOptions {
  /** Whole round trip, connect included; default 5000 ms. */
  timeoutMs?: number;
  /** Log in first (AUTH); an error reply to it rejects with RedisReplyError. */
  auth?: { user?: string; password: string };
  /** Speak TLS (a rediss:// server), trusting this CA (PEM). */
  tls?: { ca: string };
}

type Arg = string | number;

/**
 * Sends one command and returns the reply as a line of text: status, error and integer replies come
 * back raw ('+PONG', '-LOADING …', ':1'), a bulk string as its payload ('v'), a nil as '$-1' or '*-1'.
 * Error replies resolve (probes need to see '-LOADING'); arrays reject, use `redisReply` for those.
 */
export async function redisCommand(url: string, ...args: Arg[]): Promise<string> {
  return redisCommandWith(url, {}, ...args);
}

/** redisCommand with options (a login, TLS). */
export async function redisCommandWith(url: string, opts: RedisCommandOptions, ...args: Arg[]): Promise<string> {
  const { first, value } = await roundTrip(url, args, opts);
  switch (first[0]) {
    case '$':
      return value === null ? first : String(value);
    case '*':
      if (value === null) return first;
      throw new Error(`redisCommand(${String(args[0])}) got an array reply; use redisReply for commands that return arrays`);
    default:
      return first;
  }
}

/** Sends one command and returns the decoded reply; an error reply rejects with RedisReplyError. */
export async function redisReply(url: string, args: readonly Arg[], opts: RedisCommandOptions = {}): Promise<RespValue> {
  const { value } = await roundTrip(url, args, opts);
  if (value instanceof RedisReplyError) throw value;
  return value;
}

async function roundTrip(
  url: string,
  args: readonly Arg[],
  opts: RedisCommandOptions,
): Promise<{ first: string; value: RespValue }> {
  if (args.length === 0) throw new Error('redis command needs at least a command name');
  const { host, port } = hostAndPort(url);
  const timeoutMs = opts.timeoutMs ?? 5_000;
  const login = opts.auth === undefined ? undefined : opts.auth.user === undefined ? ['AUTH', opts.auth.password] : ['AUTH', opts.auth.user, opts.auth.password];
  return exchange({
    host,
    port,
    timeoutMs,
    what: `redis ${String(args[0])} reply from ${url}`,
    request: login === undefined ? encodeCommand(args) : Buffer.concat([encodeCommand(login), encodeCommand(args)]),
    ...(opts.tls === undefined ? {} : { tls: opts.tls }),
    parse: (received) => {
      let start = 0;
      if (login !== undefined) {
        const loggedIn = parseReply(received, 0);
        if (loggedIn === undefined) return undefined;
        if (loggedIn.value instanceof RedisReplyError) throw loggedIn.value;
        start = loggedIn.end;
      }
      const parsed = parseReply(received, start);
      if (parsed === undefined) return undefined;
      const lineEnd = received.indexOf('\r\n', start);
      return { first: received.toString('utf8', start, lineEnd), value: parsed.value };
    },
  });
}

function encodeCommand(args: readonly Arg[]): Buffer {
  const parts: Buffer[] = [Buffer.from(`*${args.length}\r\n`)];
  for (const arg of args) {
    const bytes = Buffer.from(String(arg), 'utf8');
    parts.push(Buffer.from(`$${bytes.length}\r\n`), bytes, Buffer.from('\r\n'));
  }
  return Buffer.concat(parts);
}

/** Decodes one reply starting at `offset`; `undefined` means more bytes are needed. */
function parseReply(buf: Buffer, offset: number): { value: RespValue; end: number } | undefined {
  const lineEnd = buf.indexOf('\r\n', offset);
  if (lineEnd === -1) return undefined;
  const type = String.fromCharCode(buf[offset] ?? 0);
  const line = buf.toString('utf8', offset + 1, lineEnd);
  const afterLine = lineEnd + 2;
  switch (type) {
    case '+':
      return { value: line, end: afterLine };
    case '-':
      return { value: new RedisReplyError(line), end: afterLine };
    case ':':
      return { value: Number(line), end: afterLine };
    case '$': {
      const length = Number(line);
      if (length < 0) return { value: null, end: afterLine };
      if (buf.length < afterLine + length + 2) return undefined;
      return { value: buf.toString('utf8', afterLine, afterLine + length), end: afterLine + length + 2 };
    }
    case '*': {
      const count = Number(line);
      if (count < 0) return { value: null, end: afterLine };
      const items: RespValue[] = [];
      let end = afterLine;
      for (let i = 0; i < count; i++) {
        const item = parseReply(buf, end);
        if (item === undefined) return undefined;
        items.push(item.value);
        end = item.end;
      }
      return { value: items, end };
    }
    default:
      // RESP3 types only appear after HELLO 3, which these helpers never send.
      throw new Error(`unexpected RESP reply type ${JSON.stringify(type)} in ${JSON.stringify(buf.toString('utf8', offset, lineEnd))}`);
  }
}
