// The example end to end on secured servers: NATS with mutual TLS (a private CA) and nkey users, Redis
// over TLS with an ACL user and no default user. The scheduler, the supervisor and the agents are real
// processes reading the settings from their environment; the test's client and the CLI connect the same
// way (the CLI also with flags).
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeTestPki, startNats, startRedis, withTeardown, type NatsServer, type RedisServer, type TestPki } from '../harness/index.js';
import { nkeyUser } from '../support/nats-identities.js';
import { cli, effectCounts, startTriad, type TestTriad } from '../support/triad.js';

const td = withTeardown(afterAll);
let pki: TestPki;
let nats: NatsServer;
let redis: RedisServer;
let triad: TestTriad;

beforeAll(async () => {
  pki = await makeTestPki(td);
  const actors = nkeyUser();
  const seedFile = join(pki.dir, 'actors.seed');
  await writeFile(seedFile, actors.seed, { mode: 0o600 });
  [nats, redis] = await Promise.all([
    startNats({
      teardown: td,
      config: [
        `authorization {\n  users = [\n    { nkey: ${actors.publicKey} }\n    { user: operator, password: "op-secret" }\n  ]\n}`,
        `tls {\n  cert_file: "${pki.serverCert}"\n  key_file: "${pki.serverKey}"\n  ca_file: "${pki.ca}"\n  verify: true\n}\n`,
      ].join('\n'),
    }),
    startRedis({
      teardown: td,
      tls: { certFile: pki.serverCert, keyFile: pki.serverKey, caFile: pki.ca },
      aclUsers: ['user default off', 'user triad on >redis-secret ~* &* +@all'],
      probeAuth: { user: 'triad', password: 'redis-secret' },
    }),
  ]);
  triad = await startTriad(
    td,
    { nats, redis },
    {
      schedulers: 2,
      agentProcesses: 2,
      env: {
        NATS_NKEY_SEED: seedFile,
        NATS_TLS_CA: pki.ca,
        NATS_TLS_CERT: pki.clientCert,
        NATS_TLS_KEY: pki.clientKey,
        REDIS_URL: redis.url.replace('rediss://', 'rediss://triad:redis-secret@'),
        REDIS_TLS_CA: pki.ca,
      },
    },
  );
});

describe('the example on secured NATS and Redis', () => {
  it('completes orders over mutual TLS with nkey credentials, each effect applied once', async () => {
    const states = await Promise.all(
      [1, 2, 3].map((n) => triad.client.run('orders', { orderId: `secure-${n}`, amount: 10 * n }, { timeoutMs: 60_000 })),
    );
    for (const s of states) expect(s.status, `task ${s.taskId}`).toBe('completed');
    for (const name of ['inventory', 'payment', 'shipping'] as const) {
      for (const [key, count] of effectCounts(triad.services[name])) expect(count, `${name} ${key}`).toBe(1);
    }
    // Redis holds the tasks: the actors reached it over TLS as the ACL user.
    const keys = await triad.redis.keys(`*${triad.namespace}*`);
    expect(keys.length).toBeGreaterThan(0);
  });

  it('the CLI submits and waits with the environment settings, and with flags instead', async () => {
    const viaEnv = await cli(triad, ['submit', 'orders', '--input', '{"orderId":"cli-env","amount":5}', '--wait', '--json']);
    expect(viaEnv.stderr).toBe('');
    expect(viaEnv.code).toBe(0);
    expect((JSON.parse(viaEnv.stdout) as { status: string }).status).toBe('completed');

    // Flags override the environment: the operator's user (its password from NATS_PASSWORD) replaces
    // the nkey, and the TLS files come from flags.
    const flagged = await cli(
      { ...triad, env: { ...triad.env, NATS_PASSWORD: 'op-secret', NATS_TLS_CA: '', NATS_TLS_CERT: '', NATS_TLS_KEY: '' } },
      [
        'submit', 'orders', '--input', '{"orderId":"cli-flags","amount":6}', '--wait', '--json',
        '--nats-user', 'operator', '--nats-tls-ca', pki.ca, '--nats-tls-cert', pki.clientCert, '--nats-tls-key', pki.clientKey,
      ],
    );
    expect(flagged.stderr).toBe('');
    expect(flagged.code).toBe(0);
    expect((JSON.parse(flagged.stdout) as { status: string }).status).toBe('completed');
  });

  it('the CLI with a wrong password or without a client certificate: refused, naming the flag or variable', async () => {
    const wrong = await cli(triad, ['workflows', '--nats-user', 'operator', '--nats-password', 'nope']);
    expect(wrong.code).toBe(2);
    expect(wrong.stderr).toBe('triad: NATS refused the credentials from --nats-user/--nats-password (user "operator"): authorization violation; check the user name and password\n');

    const { NATS_TLS_CERT: _cert, NATS_TLS_KEY: _key, ...withoutClientCert } = triad.env;
    const noCert = await cli({ ...triad, env: withoutClientCert }, ['workflows', '--request-timeout', '3000']);
    expect(noCert.code).toBe(2);
    expect(noCert.stderr).toMatch(/^triad: NATS at nats:\/\/127\.0\.0\.1:\d+ refused the TLS connection \(.+\): it requires a client certificate; set NATS_TLS_CERT and NATS_TLS_KEY\n$/);

    const empty = await cli({ ...triad, env: { ...triad.env, NATS_TLS_KEY: '' } }, ['workflows']);
    expect(empty.code).toBe(2);
    expect(empty.stderr).toContain('NATS_TLS_KEY is set but empty: set it to the path of a PEM file');
  });
});
