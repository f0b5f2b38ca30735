// TLS with a private CA, on real servers with certificates the test makes with openssl: NATS verified by
// NATS_TLS_CA, mutual TLS with NATS_TLS_CERT/NATS_TLS_KEY, Redis over rediss:// with REDIS_TLS_CA and a
// password or an ACL user — and every way it can be misconfigured refused at once, naming the setting.
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Redis } from 'ioredis';
import { TriadClient } from '@triad/client';
import { connectBus, type BusOptions } from '@triad/bus';
import { ErrorCode, TriadError } from '@triad/protocol';
import { connectRedis } from '@triad/store';
import { makeTestPki, startNats, startProcess, startRedis, uniqueNamespace, waitFor, withTeardown, type NatsServer, type RedisServer, type TestPki } from '../harness/index.js';
import { ROOT, SCRIPTS } from '../support/triad.js';

const td = withTeardown(afterAll);
let pki: TestPki;
let natsTls: NatsServer;
let natsMutual: NatsServer;
let natsPlain: NatsServer;
let redisTls: RedisServer;
let redisPassword: RedisServer;

const REDIS_PASSWORD = 'redis-secret';

const tlsBlock = (p: TestPki, verify: boolean): string =>
  `tls {\n  cert_file: "${p.serverCert}"\n  key_file: "${p.serverKey}"\n  ca_file: "${p.ca}"\n  verify: ${verify}\n  timeout: 2\n}\n`;

beforeAll(async () => {
  pki = await makeTestPki(td);
  [natsTls, natsMutual, natsPlain, redisTls, redisPassword] = await Promise.all([
    startNats({ teardown: td, config: tlsBlock(pki, false) }),
    startNats({ teardown: td, config: tlsBlock(pki, true) }),
    startNats({ teardown: td }),
    startRedis({
      teardown: td,
      aof: false,
      tls: { certFile: pki.serverCert, keyFile: pki.serverKey, caFile: pki.ca },
      aclUsers: ['user default off', 'user triad on >triad-pw ~* &* +@all'],
      probeAuth: { user: 'triad', password: 'triad-pw' },
    }),
    startRedis({ teardown: td, aof: false, password: REDIS_PASSWORD }),
  ]);
});

async function natsRefusal(o: Omit<BusOptions, 'namespace' | 'name'>): Promise<TriadError> {
  try {
    const bus = await connectBus({ connectTimeoutMs: 3_000, ...o, namespace: uniqueNamespace('tls'), name: 'tls-test' });
    await bus.close();
  } catch (e) {
    expect(e).toBeInstanceOf(TriadError);
    expect((e as TriadError).code).toBe(ErrorCode.InvalidConfig);
    return e as TriadError;
  }
  throw new Error(`connected to NATS with ${JSON.stringify(o)}`);
}

async function redisRefusal(...args: Parameters<typeof connectRedis>): Promise<TriadError> {
  try {
    const r = await connectRedis(...args);
    r.disconnect();
  } catch (e) {
    expect(e).toBeInstanceOf(TriadError);
    expect((e as TriadError).code).toBe(ErrorCode.InvalidConfig);
    return e as TriadError;
  }
  throw new Error(`connected to Redis with ${JSON.stringify(args[0])}`);
}

const withPassword = (url: string, user: string, password: string): string => url.replace('://', `://${user}:${encodeURIComponent(password)}@`);

describe('NATS over TLS with a private CA', () => {
  it('connects when NATS_TLS_CA names the CA, and the connection is encrypted', async () => {
    const bus = await connectBus({ url: natsTls.url, tlsCa: pki.ca, namespace: uniqueNamespace('tls'), name: 'tls-test' });
    td.add(() => bus.close());
    await bus.jsm.getAccountInfo();
    expect(bus.nc.info?.tls_required).toBe(true);
  });

  it('without NATS_TLS_CA: cannot verify the server, says to set it', async () => {
    const e = await natsRefusal({ url: natsTls.url });
    expect(e.message).toMatch(new RegExp(`^cannot verify the TLS certificate of NATS at ${natsTls.url} \\(.+\\): set NATS_TLS_CA to the PEM file of the CA that signed it$`));
  });

  it('with another CA: names NATS_TLS_CA and its file', async () => {
    const e = await natsRefusal({ url: natsTls.url, tlsCa: pki.otherCa });
    expect(e.message).toContain(`the TLS certificate of NATS at ${natsTls.url} is not signed by the CA in NATS_TLS_CA ("${pki.otherCa}")`);
  });

  it('a CA file that holds no certificate, before connecting', async () => {
    const e = await natsRefusal({ url: natsTls.url, tlsCa: pki.clientKey });
    expect(e.message).toBe(`NATS_TLS_CA file "${pki.clientKey}" holds no PEM certificate (-----BEGIN CERTIFICATE-----): set NATS_TLS_CA to the path of a PEM file with the CA certificate that signed the server certificate`);
  });

  it('TLS settings against a server without TLS: says the server does not offer it', async () => {
    const e = await natsRefusal({ url: natsPlain.url, tlsCa: pki.ca });
    expect(e.message).toMatch(/^NATS at .* does not offer TLS \(.*\), but NATS_TLS_CA is set: enable TLS on the server/);
  });
});

describe('NATS with mutual TLS', () => {
  it('connects with NATS_TLS_CERT and NATS_TLS_KEY (the SDK takes the same settings)', async () => {
    const client = await TriadClient.connect({ natsUrl: natsMutual.url, tlsCa: pki.ca, tlsCert: pki.clientCert, tlsKey: pki.clientKey, namespace: uniqueNamespace('mtls') });
    td.add(() => client.close());
    await client.bus.jsm.getAccountInfo();
  });

  it('without a client certificate: says to set NATS_TLS_CERT and NATS_TLS_KEY — also as a service, which does not retry it', async () => {
    const e = await natsRefusal({ url: natsMutual.url, tlsCa: pki.ca });
    expect(e.message).toMatch(new RegExp(`^NATS at ${natsMutual.url} refused the TLS connection \\(.+\\): it requires a client certificate; set NATS_TLS_CERT and NATS_TLS_KEY$`));
  });

  it('a certificate from another CA: names NATS_TLS_CERT and its file', async () => {
    const e = await natsRefusal({ url: natsMutual.url, tlsCa: pki.ca, tlsCert: pki.strangerCert, tlsKey: pki.strangerKey });
    expect(e.message).toMatch(new RegExp(`^NATS at ${natsMutual.url} refused the TLS client certificate from NATS_TLS_CERT \\("${pki.strangerCert}"\\) \\(.+\\): check that it is signed by a CA the server trusts`));
  });

  it('a key that is not the certificate\'s, before connecting', async () => {
    const e = await natsRefusal({ url: natsMutual.url, tlsCa: pki.ca, tlsCert: pki.clientCert, tlsKey: pki.strangerKey });
    expect(e.message).toBe(
      `NATS_TLS_KEY file "${pki.strangerKey}" is not the private key of the certificate in NATS_TLS_CERT ("${pki.clientCert}"): set NATS_TLS_KEY to the path of a PEM file with the client certificate's private key`,
    );
  });
});

describe('Redis with a password, and over TLS with a private CA', () => {
  let connections: Redis[] = [];
  afterAll(() => {
    for (const r of connections) r.disconnect();
    connections = [];
  });
  const open = async (...args: Parameters<typeof connectRedis>): Promise<Redis> => {
    const r = await connectRedis(...args);
    connections.push(r);
    return r;
  };

  it('connects with the password in REDIS_URL', async () => {
    const r = await open(withPassword(redisPassword.url, '', REDIS_PASSWORD));
    expect(await r.ping()).toBe('PONG');
  });

  it('a wrong password, or none: names REDIS_URL, never echoing the password', async () => {
    const wrong = await redisRefusal(withPassword(redisPassword.url, '', 'not-the-password'));
    expect(wrong.message).toMatch(new RegExp(`^Redis at ${redisPassword.url} refused the credentials in REDIS_URL \\(the default user\\): WRONGPASS .*; check the user name and password in REDIS_URL`));
    expect(wrong.message).not.toContain('not-the-password');
    const none = await redisRefusal(redisPassword.url);
    expect(none.message).toMatch(new RegExp(`^Redis at ${redisPassword.url} requires a password and REDIS_URL has none \\(.*NOAUTH.*\\): set REDIS_URL to redis://USER:PASSWORD@HOST:PORT`));
  });

  it('connects over rediss:// as an ACL user, trusting REDIS_TLS_CA', async () => {
    const r = await open({ url: withPassword(redisTls.url, 'triad', 'triad-pw'), tlsCa: pki.ca });
    expect(await r.ping()).toBe('PONG');
    expect(await r.acl('WHOAMI')).toBe('triad');
  });

  it('over TLS: a wrong user, no CA, another CA — each names its setting', async () => {
    const wrongUser = await redisRefusal({ url: withPassword(redisTls.url, 'nobody', 'triad-pw'), tlsCa: pki.ca });
    expect(wrongUser.message).toMatch(/^Redis at rediss:\/\/127\.0\.0\.1:\d+ refused the credentials in REDIS_URL \(user "nobody"\): WRONGPASS/);
    const noCa = await redisRefusal({ url: withPassword(redisTls.url, 'triad', 'triad-pw') });
    expect(noCa.message).toMatch(/^cannot verify the TLS certificate of Redis at rediss:\/\/127\.0\.0\.1:\d+ \(.+\): set REDIS_TLS_CA to the PEM file of the CA that signed it$/);
    const otherCa = await redisRefusal({ url: withPassword(redisTls.url, 'triad', 'triad-pw'), tlsCa: pki.otherCa });
    expect(otherCa.message).toContain(`is not signed by the CA in REDIS_TLS_CA ("${pki.otherCa}")`);
  });

  it('REDIS_TLS_CA with redis://, or a missing CA file, before connecting', async () => {
    const plain = await redisRefusal({ url: redisPassword.url, tlsCa: pki.ca });
    expect(plain.message).toBe('invalid Redis connection settings: REDIS_TLS_CA is set but REDIS_URL uses redis:// (no TLS): use rediss:// to connect over TLS, or unset REDIS_TLS_CA');
    const missing = join(pki.dir, 'missing.pem');
    const e = await redisRefusal({ url: redisTls.url, tlsCa: missing });
    expect(e.message).toMatch(/^cannot read REDIS_TLS_CA file ".*missing\.pem" \(no such file\)/);
  });

  it('Redis down at start, then up refusing the credentials: the client stops and reports it', async () => {
    const redis = await startRedis({ teardown: td, aof: false, password: REDIS_PASSWORD });
    await redis.kill();
    const fatal: TriadError[] = [];
    // Returns while Redis is down (a service starts anyway) ...
    const r = await open(withPassword(redis.url, '', 'stale-password'), {}, { onFatal: (e) => fatal.push(e) });
    await redis.restart();
    // ... and reports the refusal once Redis answers.
    const e = await waitFor(() => fatal[0], { timeoutMs: 20_000, what: 'the refusal of the stale password after Redis came up' });
    expect(e.message).toMatch(/refused the credentials in REDIS_URL \(the default user\): WRONGPASS/);
    await waitFor(() => r.status === 'end', { timeoutMs: 10_000, what: 'the client to stop retrying', lastSeen: () => r.status });
  });

  it('Redis paused at start (no answer, no error): connectRedis still returns, and commands run once it resumes', async () => {
    const redis = await startRedis({ teardown: td, aof: false, password: REDIS_PASSWORD });
    redis.pause();
    let r: Redis;
    try {
      r = await open(withPassword(redis.url, '', REDIS_PASSWORD));
    } finally {
      redis.resume();
    }
    expect(await r.ping()).toBe('PONG');
  });

  it('a supervisor with the wrong Redis password exits at start, naming REDIS_URL', async () => {
    const p = await startProcess({
      name: 'supervisor-wrong-password',
      args: [SCRIPTS.supervisor],
      cwd: ROOT,
      teardown: td,
      env: { NATS_URL: natsPlain.url, REDIS_URL: withPassword(redisPassword.url, '', 'wrong'), TRIAD_NAMESPACE: uniqueNamespace('tls') },
    });
    expect(await p.exited).toBe(1);
    expect(p.output()).toMatch(/supervisor failed to start: Redis at redis:\/\/127\.0\.0\.1:\d+ refused the credentials in REDIS_URL \(the default user\): WRONGPASS/);
  });
});

describe('files', () => {
  it('an unreadable client certificate file is named before connecting', async () => {
    const unreadable = join(pki.dir, 'unreadable.pem');
    await writeFile(unreadable, 'x', { mode: 0o000 });
    const e = await natsRefusal({ url: natsMutual.url, tlsCa: pki.ca, tlsCert: unreadable, tlsKey: pki.clientKey });
    // root reads any file: then the content is what is refused.
    expect(e.message).toMatch(new RegExp(`^(cannot read NATS_TLS_CERT file "${unreadable}" \\(permission denied\\)|NATS_TLS_CERT file "${unreadable}" holds no usable PEM certificate)`));
  });
});
