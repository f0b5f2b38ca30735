// The NATS and Redis connection settings: what each combination of variables means, and every way a
// setting is refused (naming it, or the flag that set it, and what to set).
import { describe, expect, it } from 'vitest';
import { ErrorCode, TriadError } from '@triad/protocol';
import {
  checkNatsSettings,
  checkRedisSettings,
  explainTlsFailure,
  loadConfig,
  natsOptionsFromEnv,
  parseNatsSettings,
  redactUrl,
  tlsDetail,
  tlsFailure,
  unreadableSettingFile,
} from '../src/index.js';

/** The problems of an environment's NATS settings, as messages. */
const natsProblems = (env: NodeJS.ProcessEnv): string[] => checkNatsSettings(natsOptionsFromEnv(env)).problems.map((p) => p.message);

function configError(env: NodeJS.ProcessEnv): TriadError {
  try {
    loadConfig(env);
  } catch (e) {
    expect(e).toBeInstanceOf(TriadError);
    expect((e as TriadError).code).toBe(ErrorCode.InvalidConfig);
    return e as TriadError;
  }
  throw new Error(`loadConfig accepted ${JSON.stringify(env)}`);
}

describe('NATS settings', () => {
  it('takes every server of a comma-separated NATS_URL, and the one auth method set', () => {
    const s = parseNatsSettings(natsOptionsFromEnv({ NATS_URL: 'nats://a:4222, tls://b:4223,c:4224', NATS_CREDS: '/run/user.creds', NATS_TLS_CA: '/ca.pem' }));
    expect(s.servers).toEqual(['nats://a:4222', 'tls://b:4223', 'c:4224']);
    expect(s.auth).toEqual({ method: 'creds', credsFile: '/run/user.creds' });
    expect(s.tls).toEqual({ caFile: '/ca.pem' });
    expect(parseNatsSettings(natsOptionsFromEnv({ NATS_NKEY_SEED: '/seed' })).auth).toEqual({ method: 'nkey', seedFile: '/seed' });
    expect(parseNatsSettings(natsOptionsFromEnv({ NATS_USER: 'alice', NATS_PASSWORD: 'p w' })).auth).toEqual({ method: 'userPassword', user: 'alice', password: 'p w' });
    expect(parseNatsSettings(natsOptionsFromEnv({ NATS_TOKEN: 't0k' })).auth).toEqual({ method: 'token', token: 't0k' });
    expect(parseNatsSettings(natsOptionsFromEnv({ NATS_TLS_CERT: '/c.pem', NATS_TLS_KEY: '/k.pem' })).tls).toEqual({ certFile: '/c.pem', keyFile: '/k.pem' });
    const none = parseNatsSettings(natsOptionsFromEnv({ NATS_URL: '' }));
    expect(none).toMatchObject({ servers: ['nats://127.0.0.1:4222'] });
    expect(none.auth).toBeUndefined();
    expect(none.tls).toBeUndefined();
  });

  it('refuses two auth methods at once, naming both', () => {
    expect(natsProblems({ NATS_CREDS: '/a.creds', NATS_TOKEN: 't' })).toEqual([
      'NATS_CREDS and NATS_TOKEN are both set: a NATS connection uses exactly one auth method; unset all but one',
    ]);
    const [three] = natsProblems({ NATS_NKEY_SEED: '/seed', NATS_USER: 'u', NATS_PASSWORD: 'p', NATS_TOKEN: 't' });
    expect(three).toBe('NATS_NKEY_SEED, NATS_USER/NATS_PASSWORD and NATS_TOKEN are all set: a NATS connection uses exactly one auth method; unset all but one');
  });

  it('refuses empty values, half a user/password pair and a certificate without its key', () => {
    expect(natsProblems({ NATS_CREDS: ' ' })).toEqual([expect.stringMatching(/^NATS_CREDS is set but empty: set it to the path of a \.creds file .*, or unset it$/)]);
    expect(natsProblems({ NATS_TLS_CA: '' })[0]).toMatch(/^NATS_TLS_CA is set but empty: set it to the path of a PEM file/);
    expect(natsProblems({ NATS_USER: 'alice' })).toEqual(['NATS_USER is set but NATS_PASSWORD is not: set both, or neither']);
    expect(natsProblems({ NATS_PASSWORD: 'pw' })).toEqual(['NATS_PASSWORD is set but NATS_USER is not: set both, or neither']);
    expect(natsProblems({ NATS_TLS_CERT: '/c.pem' })).toEqual([
      'NATS_TLS_CERT is set but NATS_TLS_KEY is not: a client certificate needs its private key; set both, or neither',
    ]);
    expect(natsProblems({ NATS_TLS_KEY: '/k.pem' })).toEqual(['NATS_TLS_KEY is set but NATS_TLS_CERT is not: set the client certificate too, or neither']);
  });

  it('refuses server lists it cannot use, and credentials in the URL (which nats.js would ignore)', () => {
    expect(natsProblems({ NATS_URL: 'nats://a:4222,,nats://b:4222' })[0]).toMatch(/^NATS_URL "nats:\/\/a:4222,,nats:\/\/b:4222" has an empty server entry: set NATS_URL to nats:\/\/HOST:4222/);
    expect(natsProblems({ NATS_URL: 'http://a:4222' })[0]).toMatch(/uses http:\/\/, which this client does not speak/);
    const [withPassword] = natsProblems({ NATS_URL: 'nats://alice:s3cret@a:4222' });
    expect(withPassword).toBe(
      'NATS_URL server "nats://alice:***@a:4222" carries credentials, which the NATS client ignores: put them in NATS_USER and NATS_PASSWORD (or NATS_TOKEN) and leave them out of the URL',
    );
    expect(withPassword).not.toContain('s3cret');
  });

  it('names the label a caller gives a setting (the CLI names its flags)', () => {
    const { problems } = checkNatsSettings({ creds: '/a.creds', token: 't', labels: { NATS_CREDS: '--nats-creds' } });
    expect(problems.map((p) => p.message)).toEqual(['--nats-creds and NATS_TOKEN are both set: a NATS connection uses exactly one auth method; unset all but one']);
  });
});

describe('Redis settings', () => {
  it('keeps REDIS_URL with its user and password, and takes REDIS_TLS_CA with rediss://', () => {
    const r = checkRedisSettings({ url: 'rediss://triad:pw@cache:6380/0', tlsCa: '/ca.pem' });
    expect(r.problems).toEqual([]);
    expect(r.value).toMatchObject({ url: 'rediss://triad:pw@cache:6380/0', tlsCaFile: '/ca.pem' });
  });

  it('takes TRIAD_REDIS_CLUSTER seed nodes (with REDIS_URL for credentials and TLS), and refuses what is not HOST:PORT', () => {
    const r = checkRedisSettings({ url: 'rediss://triad:pw@ignored:6380', tlsCa: '/ca.pem', cluster: 'r1:7000, 10.0.0.2:7001,[::1]:7002' });
    expect(r.problems).toEqual([]);
    expect(r.value).toMatchObject({
      url: 'rediss://triad:pw@ignored:6380',
      tlsCaFile: '/ca.pem',
      cluster: [
        { host: 'r1', port: 7000 },
        { host: '10.0.0.2', port: 7001 },
        { host: '::1', port: 7002 },
      ],
    });
    expect(checkRedisSettings({ cluster: 'r1:7000,redis://r2:7001,r3' }).problems.map((p) => p.message)).toEqual([
      expect.stringMatching(/^TRIAD_REDIS_CLUSTER has "redis:\/\/r2:7001", which is not HOST:PORT: set it to the seed nodes/),
      expect.stringMatching(/^TRIAD_REDIS_CLUSTER has "r3", which is not HOST:PORT/),
    ]);
    expect(checkRedisSettings({ cluster: '' }).value.cluster).toBeUndefined();
    expect(loadConfig({ TRIAD_REDIS_CLUSTER: 'a:1,b:2', TRIAD_REDIS_WAIT_REPLICAS: '1' })).toMatchObject({ redis: { cluster: 'a:1,b:2' }, redisWaitReplicas: 1, redisWaitMs: 1_000 });
    expect(configError({ TRIAD_REDIS_WAIT_REPLICAS: 'one' }).details[0]).toMatch(/^TRIAD_REDIS_WAIT_REPLICAS:/);
  });

  it('refuses REDIS_TLS_CA with redis:// and says to use rediss://', () => {
    expect(checkRedisSettings({ url: 'redis://cache:6379', tlsCa: '/ca.pem' }).problems.map((p) => p.message)).toEqual([
      'REDIS_TLS_CA is set but REDIS_URL uses redis:// (no TLS): use rediss:// to connect over TLS, or unset REDIS_TLS_CA',
    ]);
    expect(checkRedisSettings({ url: 'rediss://cache:6380', tlsCa: '' }).problems[0]?.message).toMatch(/^REDIS_TLS_CA is set but empty/);
  });

  it('lists every problem of the whole configuration, never echoing a password', () => {
    const e = configError({ REDIS_URL: 'http://u:hunter2@cache', NATS_USER: 'alice', TRIAD_LOG_LEVEL: 'loud' });
    expect(e.details).toHaveLength(3);
    expect(e.details[0]).toMatch(/^TRIAD_LOG_LEVEL:/);
    expect(e.details).toContain('NATS_USER is set but NATS_PASSWORD is not: set both, or neither');
    expect(e.message).toContain('REDIS_URL must start with redis:// or rediss:// (got "http://u:***@cache")');
    expect(e.message).not.toContain('hunter2');
  });

  it('redacts a URL password', () => {
    expect(redactUrl('rediss://triad:p%40ss@cache:6380')).toBe('rediss://triad:***@cache:6380');
    expect(redactUrl('redis://:only-pass@cache')).toBe('redis://:***@cache');
    expect(redactUrl('redis://cache:6379')).toBe('redis://cache:6379');
  });
});

describe('connection failure messages', () => {
  it('says which file could not be read and why', () => {
    const missing = unreadableSettingFile('NATS_CREDS', '/nope.creds', 'the path of a .creds file', Object.assign(new Error('ENOENT: no such file'), { code: 'ENOENT' }));
    expect(missing.code).toBe(ErrorCode.InvalidConfig);
    expect(missing.message).toBe('cannot read NATS_CREDS file "/nope.creds" (no such file): set NATS_CREDS to the path of a .creds file');
    expect(unreadableSettingFile('REDIS_TLS_CA', '/ca.pem', 'a PEM file').message).toBe('cannot read REDIS_TLS_CA file "/ca.pem" (it is empty): set REDIS_TLS_CA to a PEM file');
  });

  it('classifies TLS errors by their code, also on a cause', () => {
    const coded = (code: string) => Object.assign(new Error(code), { code });
    expect(tlsFailure(coded('SELF_SIGNED_CERT_IN_CHAIN'))).toBe('untrusted');
    expect(tlsFailure(coded('UNABLE_TO_VERIFY_LEAF_SIGNATURE'))).toBe('untrusted');
    expect(tlsFailure(coded('CERT_HAS_EXPIRED'))).toBe('expired');
    expect(tlsFailure(coded('ERR_TLS_CERT_ALTNAME_INVALID'))).toBe('hostname');
    expect(tlsFailure(coded('ERR_SSL_TLSV13_ALERT_CERTIFICATE_REQUIRED'))).toBe('refused');
    expect(tlsFailure(new Error('wrapped', { cause: coded('ERR_SSL_SSLV3_ALERT_BAD_CERTIFICATE') }))).toBe('refused');
    expect(tlsFailure(coded('ERR_SSL_WRONG_VERSION_NUMBER'))).toBe('protocol');
    expect(tlsFailure(coded('ECONNREFUSED'))).toBeUndefined();
    expect(tlsFailure(new Error('timeout'))).toBeUndefined();
  });

  it("shortens OpenSSL's error text to its reason and code", () => {
    const openssl = Object.assign(
      new Error('80BCE169B27F0000:error:0A000412:SSL routines:ssl3_read_bytes:sslv3 alert bad certificate:../deps/openssl/openssl/ssl/record/rec_layer_s3.c:1601:SSL alert number 42\n'),
      { code: 'ERR_SSL_SSLV3_ALERT_BAD_CERTIFICATE' },
    );
    expect(tlsDetail(openssl)).toBe('ERR_SSL_SSLV3_ALERT_BAD_CERTIFICATE: sslv3 alert bad certificate');
    expect(tlsDetail(new Error('unable to verify the first certificate'))).toBe('unable to verify the first certificate');
  });

  it('names the CA setting, or the client certificate settings, to fix', () => {
    const ctx = { service: 'NATS', where: 'tls://n:4222', ca: { label: 'NATS_TLS_CA' }, clientCert: { certLabel: 'NATS_TLS_CERT', keyLabel: 'NATS_TLS_KEY' }, protocolHint: 'check' };
    expect(explainTlsFailure('untrusted', new Error('self-signed certificate in certificate chain'), ctx).message).toBe(
      'cannot verify the TLS certificate of NATS at tls://n:4222 (self-signed certificate in certificate chain): set NATS_TLS_CA to the PEM file of the CA that signed it',
    );
    expect(explainTlsFailure('untrusted', new Error('x'), { ...ctx, ca: { label: 'NATS_TLS_CA', file: '/ca.pem' } }).message).toMatch(
      /is not signed by the CA in NATS_TLS_CA \("\/ca\.pem"\)/,
    );
    expect(explainTlsFailure('refused', new Error('alert'), ctx).message).toMatch(/requires a client certificate; set NATS_TLS_CERT and NATS_TLS_KEY$/);
    const redis = explainTlsFailure('refused', new Error('alert'), { service: 'Redis', where: 'rediss://r:6380', ca: { label: 'REDIS_TLS_CA' }, protocolHint: 'check' });
    expect(redis.message).toMatch(/which Triad does not send to Redis; .*tls-auth-clients no/);
  });
});
