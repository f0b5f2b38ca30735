/**
 * The NATS and Redis connection settings (servers, credentials, TLS files) and their validation: pure
 * checks of the values, so a bad setting is refused at start-up naming the variable; the files they
 * name are read by the connect functions (packages/bus, packages/store).
 */
import { z } from 'zod';
import { ErrorCode, TriadError } from '@triad/protocol';

/** The environment variables of the two connections. Messages name them, or the CLI flag that set one. */
export const CONNECTION_VARIABLES = [
  'NATS_URL',
  'NATS_CREDS',
  'NATS_NKEY_SEED',
  'NATS_USER',
  'NATS_PASSWORD',
  'NATS_TOKEN',
  'NATS_TLS_CA',
  'NATS_TLS_CERT',
  'NATS_TLS_KEY',
  'REDIS_URL',
  'REDIS_TLS_CA',
  'TRIAD_REDIS_CLUSTER',
] as const;
export type ConnectionVariable = (typeof CONNECTION_VARIABLES)[number];

/** What messages call a setting when not its environment variable (the CLI names its flags). */
export type SettingLabels = Partial<Record<ConnectionVariable, string>>;
export type Labels = Readonly<Record<ConnectionVariable, string>>;

export const DEFAULT_NATS_URL = 'nats://127.0.0.1:4222';
export const DEFAULT_REDIS_URL = 'redis://127.0.0.1:6379';

/** The NATS connection as a caller gives it: one field per environment variable (files are paths). */
export interface NatsConnectionOptions {
  /** NATS_URL: a server URL, or several comma-separated (all are passed to the client). */
  url?: string;
  /** NATS_CREDS: a .creds file (a user JWT and its nkey seed). */
  creds?: string;
  /** NATS_NKEY_SEED: a file holding a user nkey seed ("SU…"). */
  nkeySeed?: string;
  /** NATS_USER and NATS_PASSWORD. */
  user?: string;
  password?: string;
  /** NATS_TOKEN. */
  token?: string;
  /** NATS_TLS_CA: PEM file of the CA that signed the server's certificate (a private CA). */
  tlsCa?: string;
  /** NATS_TLS_CERT and NATS_TLS_KEY: PEM files of a client certificate and its key (mutual TLS). */
  tlsCert?: string;
  tlsKey?: string;
  labels?: SettingLabels;
}

export type NatsAuth =
  | { method: 'creds'; credsFile: string }
  | { method: 'nkey'; seedFile: string }
  | { method: 'userPassword'; user: string; password: string }
  | { method: 'token'; token: string };

export interface NatsTlsFiles {
  caFile?: string;
  certFile?: string;
  keyFile?: string;
}

/** A validated NATS connection: the servers, at most one auth method, the TLS files. */
export interface NatsSettings {
  servers: string[];
  auth?: NatsAuth;
  tls?: NatsTlsFiles;
  labels: Labels;
}

/** The Redis connection as a caller gives it: REDIS_URL (user, password, rediss://) and REDIS_TLS_CA. */
export interface RedisConnectionOptions {
  url?: string;
  tlsCa?: string;
  /**
   * TRIAD_REDIS_CLUSTER: seed nodes of a Redis Cluster, `host:port,host:port,…` (decision 0015). The user,
   * password and TLS (rediss://, REDIS_TLS_CA) are then REDIS_URL's; its host is one more seed.
   */
  cluster?: string;
  labels?: SettingLabels;
}

export interface RedisSettings {
  url: string;
  /** Only with rediss://. */
  tlsCaFile?: string;
  /** Seed nodes of a Redis Cluster (TRIAD_REDIS_CLUSTER); absent = one Redis at `url`. */
  cluster?: { host: string; port: number }[];
  labels: Labels;
}

export function resolveLabels(labels: SettingLabels = {}): Labels {
  return Object.fromEntries(CONNECTION_VARIABLES.map((v) => [v, labels[v] ?? v])) as Labels;
}

/** The NATS settings from the environment; an empty NATS_URL counts as unset, other empty values are refused. */
export function natsOptionsFromEnv(env: NodeJS.ProcessEnv, labels?: SettingLabels): NatsConnectionOptions {
  const o: NatsConnectionOptions = {};
  if (env['NATS_URL']) o.url = env['NATS_URL'];
  const fields: [keyof NatsConnectionOptions, ConnectionVariable][] = [
    ['creds', 'NATS_CREDS'],
    ['nkeySeed', 'NATS_NKEY_SEED'],
    ['user', 'NATS_USER'],
    ['password', 'NATS_PASSWORD'],
    ['token', 'NATS_TOKEN'],
    ['tlsCa', 'NATS_TLS_CA'],
    ['tlsCert', 'NATS_TLS_CERT'],
    ['tlsKey', 'NATS_TLS_KEY'],
  ];
  for (const [field, variable] of fields) {
    const value = env[variable];
    if (value !== undefined) (o as Record<string, string>)[field] = value;
  }
  if (labels) o.labels = labels;
  return o;
}

/** The Redis settings from the environment; an empty REDIS_URL counts as unset, an empty REDIS_TLS_CA is refused. */
export function redisOptionsFromEnv(env: NodeJS.ProcessEnv, labels?: SettingLabels): RedisConnectionOptions {
  return {
    ...(env['REDIS_URL'] ? { url: env['REDIS_URL'] } : {}),
    ...(env['REDIS_TLS_CA'] !== undefined ? { tlsCa: env['REDIS_TLS_CA'] } : {}),
    ...(env['TRIAD_REDIS_CLUSTER'] ? { cluster: env['TRIAD_REDIS_CLUSTER'] } : {}),
    ...(labels ? { labels } : {}),
  };
}

/** Each setting that is a file, and what it must hold (said back when it is missing or empty). */
const WHAT: Record<Exclude<ConnectionVariable, 'NATS_URL' | 'REDIS_URL' | 'TRIAD_REDIS_CLUSTER'>, string> = {
  NATS_CREDS: 'the path of a .creds file (a user JWT and its nkey seed, as `nsc generate creds` writes)',
  NATS_NKEY_SEED: 'the path of a file holding a user nkey seed (one line starting with "SU")',
  NATS_USER: 'the NATS user name',
  NATS_PASSWORD: "the NATS user's password",
  NATS_TOKEN: 'the NATS authentication token',
  NATS_TLS_CA: 'the path of a PEM file with the CA certificate that signed the server certificate',
  NATS_TLS_CERT: 'the path of a PEM file with the client certificate',
  NATS_TLS_KEY: "the path of a PEM file with the client certificate's private key",
  REDIS_TLS_CA: 'the path of a PEM file with the CA certificate that signed the Redis server certificate',
};

const optionalString = z.string().optional();

const NatsOptionsSchema = z.object({
  url: optionalString,
  creds: optionalString,
  nkeySeed: optionalString,
  user: optionalString,
  password: optionalString,
  token: optionalString,
  tlsCa: optionalString,
  tlsCert: optionalString,
  tlsKey: optionalString,
});

const RedisOptionsSchema = z.object({ url: optionalString, tlsCa: optionalString, cluster: optionalString });

/** A problem with one setting: the variable it is about, and a message that already names it. */
export interface SettingProblem {
  variable: ConnectionVariable;
  message: string;
}

function notEmpty(value: string | undefined, variable: keyof typeof WHAT, l: Labels, problems: SettingProblem[]): string | undefined {
  if (value === undefined) return undefined;
  if (value.trim() === '') {
    problems.push({ variable, message: `${l[variable]} is set but empty: set it to ${WHAT[variable]}, or unset it` });
    return undefined;
  }
  return value;
}

/** The servers of NATS_URL: comma-separated URLs (nats://, tls://) or host:port, never user:password@. */
function natsServers(url: string, l: Labels, problems: SettingProblem[]): string[] {
  const servers = url.split(',').map((s) => s.trim());
  const hint = `set ${l.NATS_URL} to nats://HOST:4222 (several servers: comma-separated)`;
  for (const s of servers) {
    if (s === '') {
      problems.push({ variable: 'NATS_URL', message: `${l.NATS_URL} "${url}" has an empty server entry: ${hint}` });
      continue;
    }
    const scheme = /^([a-z][a-z0-9+.-]*):\/\//i.exec(s)?.[1]?.toLowerCase();
    if (scheme !== undefined && scheme !== 'nats' && scheme !== 'tls') {
      problems.push({ variable: 'NATS_URL', message: `${l.NATS_URL} server "${s}" uses ${scheme}://, which this client does not speak: ${hint}` });
      continue;
    }
    let parsed: URL;
    try {
      parsed = new URL(scheme === undefined ? `nats://${s}` : s);
    } catch {
      problems.push({ variable: 'NATS_URL', message: `${l.NATS_URL} server "${s}" is not a URL: ${hint}` });
      continue;
    }
    if (parsed.hostname === '') problems.push({ variable: 'NATS_URL', message: `${l.NATS_URL} server "${s}" names no host: ${hint}` });
    if (parsed.username !== '' || parsed.password !== '') {
      // nats.js ignores credentials in a URL: say so rather than connect without them.
      problems.push({
        variable: 'NATS_URL',
        message: `${l.NATS_URL} server "${redactUrl(s)}" carries credentials, which the NATS client ignores: put them in ${l.NATS_USER} and ${l.NATS_PASSWORD} (or ${l.NATS_TOKEN}) and leave them out of the URL`,
      });
    }
  }
  return servers;
}

/** Checks NATS settings; the problems name each setting (by its label) and say what to set. */
export function checkNatsSettings(input: NatsConnectionOptions): { value: NatsSettings; problems: SettingProblem[] } {
  const l = resolveLabels(input.labels);
  const problems: SettingProblem[] = [];
  const shape = NatsOptionsSchema.safeParse(input);
  if (!shape.success) {
    for (const i of shape.error.issues) problems.push({ variable: 'NATS_URL', message: `NATS option ${i.path.join('.')}: ${i.message}` });
    return { value: { servers: [], labels: l }, problems };
  }
  const o = shape.data;
  const servers = natsServers(o.url === undefined || o.url.trim() === '' ? DEFAULT_NATS_URL : o.url, l, problems);
  const creds = notEmpty(o.creds, 'NATS_CREDS', l, problems);
  const nkeySeed = notEmpty(o.nkeySeed, 'NATS_NKEY_SEED', l, problems);
  const user = notEmpty(o.user, 'NATS_USER', l, problems);
  const password = notEmpty(o.password, 'NATS_PASSWORD', l, problems);
  const token = notEmpty(o.token, 'NATS_TOKEN', l, problems);
  const tlsCa = notEmpty(o.tlsCa, 'NATS_TLS_CA', l, problems);
  const tlsCert = notEmpty(o.tlsCert, 'NATS_TLS_CERT', l, problems);
  const tlsKey = notEmpty(o.tlsKey, 'NATS_TLS_KEY', l, problems);

  // Which auth methods are set at all (an empty value counts: it was meant as one).
  const methods: { variable: ConnectionVariable; name: string }[] = [];
  if (o.creds !== undefined) methods.push({ variable: 'NATS_CREDS', name: l.NATS_CREDS });
  if (o.nkeySeed !== undefined) methods.push({ variable: 'NATS_NKEY_SEED', name: l.NATS_NKEY_SEED });
  if (o.user !== undefined || o.password !== undefined) methods.push({ variable: 'NATS_USER', name: `${l.NATS_USER}/${l.NATS_PASSWORD}` });
  if (o.token !== undefined) methods.push({ variable: 'NATS_TOKEN', name: l.NATS_TOKEN });
  if (methods.length > 1) {
    const names = methods.map((m) => m.name);
    const listed = `${names.slice(0, -1).join(', ')} and ${names[names.length - 1]!}`;
    problems.push({
      variable: methods[0]!.variable,
      message: `${listed} are ${methods.length === 2 ? 'both' : 'all'} set: a NATS connection uses exactly one auth method; unset all but one`,
    });
  }
  if (o.user !== undefined && o.password === undefined) {
    problems.push({ variable: 'NATS_PASSWORD', message: `${l.NATS_USER} is set but ${l.NATS_PASSWORD} is not: set both, or neither` });
  }
  if (o.password !== undefined && o.user === undefined) {
    problems.push({ variable: 'NATS_USER', message: `${l.NATS_PASSWORD} is set but ${l.NATS_USER} is not: set both, or neither` });
  }
  if (o.tlsCert !== undefined && o.tlsKey === undefined) {
    problems.push({ variable: 'NATS_TLS_KEY', message: `${l.NATS_TLS_CERT} is set but ${l.NATS_TLS_KEY} is not: a client certificate needs its private key; set both, or neither` });
  }
  if (o.tlsKey !== undefined && o.tlsCert === undefined) {
    problems.push({ variable: 'NATS_TLS_CERT', message: `${l.NATS_TLS_KEY} is set but ${l.NATS_TLS_CERT} is not: set the client certificate too, or neither` });
  }

  let auth: NatsAuth | undefined;
  if (creds !== undefined) auth = { method: 'creds', credsFile: creds };
  else if (nkeySeed !== undefined) auth = { method: 'nkey', seedFile: nkeySeed };
  else if (user !== undefined && password !== undefined) auth = { method: 'userPassword', user, password };
  else if (token !== undefined) auth = { method: 'token', token };
  const tls: NatsTlsFiles = {
    ...(tlsCa !== undefined ? { caFile: tlsCa } : {}),
    ...(tlsCert !== undefined ? { certFile: tlsCert } : {}),
    ...(tlsKey !== undefined ? { keyFile: tlsKey } : {}),
  };
  return {
    value: { servers, labels: l, ...(auth ? { auth } : {}), ...(Object.keys(tls).length > 0 ? { tls } : {}) },
    problems,
  };
}

/** Checks Redis settings: REDIS_URL is redis:// or rediss://; REDIS_TLS_CA goes with rediss:// only. */
export function checkRedisSettings(input: RedisConnectionOptions): { value: RedisSettings; problems: SettingProblem[] } {
  const l = resolveLabels(input.labels);
  const problems: SettingProblem[] = [];
  const shape = RedisOptionsSchema.safeParse(input);
  if (!shape.success) {
    for (const i of shape.error.issues) problems.push({ variable: 'REDIS_URL', message: `Redis option ${i.path.join('.')}: ${i.message}` });
    return { value: { url: DEFAULT_REDIS_URL, labels: l }, problems };
  }
  const url = shape.data.url === undefined || shape.data.url.trim() === '' ? DEFAULT_REDIS_URL : shape.data.url.trim();
  const tlsCa = notEmpty(shape.data.tlsCa, 'REDIS_TLS_CA', l, problems);
  const hint = `set it to redis://[USER:PASSWORD@]HOST:6379 (rediss:// for TLS)`;
  if (!/^rediss?:\/\//i.test(url)) {
    problems.push({ variable: 'REDIS_URL', message: `${l.REDIS_URL} must start with redis:// or rediss:// (got "${redactUrl(url)}"): ${hint}` });
  } else {
    let parsed: URL | undefined;
    try {
      parsed = new URL(url);
    } catch {
      problems.push({ variable: 'REDIS_URL', message: `${l.REDIS_URL} "${redactUrl(url)}" is not a URL: ${hint}` });
    }
    if (parsed && parsed.hostname === '') problems.push({ variable: 'REDIS_URL', message: `${l.REDIS_URL} "${redactUrl(url)}" names no host: ${hint}` });
    if (tlsCa !== undefined && parsed?.protocol === 'redis:') {
      problems.push({
        variable: 'REDIS_TLS_CA',
        message: `${l.REDIS_TLS_CA} is set but ${l.REDIS_URL} uses redis:// (no TLS): use rediss:// to connect over TLS, or unset ${l.REDIS_TLS_CA}`,
      });
    }
  }
  const cluster = shape.data.cluster === undefined || shape.data.cluster.trim() === '' ? undefined : clusterNodes(shape.data.cluster, l, problems);
  return {
    value: { url, labels: l, ...(tlsCa !== undefined && /^rediss:/i.test(url) ? { tlsCaFile: tlsCa } : {}), ...(cluster ? { cluster } : {}) },
    problems,
  };
}

/** The seed nodes of TRIAD_REDIS_CLUSTER: `host:port` separated by commas. */
function clusterNodes(text: string, l: Labels, problems: SettingProblem[]): { host: string; port: number }[] {
  const hint = `set it to the seed nodes of the cluster, HOST:PORT,HOST:PORT,… (credentials and TLS go in ${l.REDIS_URL}: rediss://USER:PASSWORD@HOST:PORT)`;
  const nodes: { host: string; port: number }[] = [];
  for (const raw of text.split(',').map((s) => s.trim())) {
    const m = /^(\[[0-9a-fA-F:.]+\]|[^\s:/@]+):(\d{1,5})$/.exec(raw);
    const port = m ? Number(m[2]) : NaN;
    if (!m || !(port > 0 && port < 65536)) {
      problems.push({ variable: 'TRIAD_REDIS_CLUSTER', message: `${l.TRIAD_REDIS_CLUSTER} has "${raw}", which is not HOST:PORT: ${hint}` });
      continue;
    }
    nodes.push({ host: (m[1] as string).replace(/^\[|\]$/g, ''), port });
  }
  return nodes;
}

function refuse(what: string, problems: SettingProblem[]): never {
  const details = problems.map((p) => p.message);
  throw new TriadError(ErrorCode.InvalidConfig, `invalid ${what}: ${details.join('; ')}`, { details });
}

/** The validated NATS connection, or a TriadError INVALID_CONFIG listing every problem. */
export function parseNatsSettings(input: NatsConnectionOptions): NatsSettings {
  const { value, problems } = checkNatsSettings(input);
  if (problems.length > 0) refuse('NATS connection settings', problems);
  return value;
}

/** The validated Redis connection, or a TriadError INVALID_CONFIG listing every problem. */
export function parseRedisSettings(input: RedisConnectionOptions): RedisSettings {
  const { value, problems } = checkRedisSettings(input);
  if (problems.length > 0) refuse('Redis connection settings', problems);
  return value;
}

/** A URL with its password replaced by "***", for messages and logs. */
export function redactUrl(url: string): string {
  return url.replace(/^([a-z][a-z0-9+.-]*:\/\/[^:@/]*:)[^@/]*@/i, '$1***@');
}
