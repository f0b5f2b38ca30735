// NATS with credentials, on real nats-servers configured with users and passwords, nkey users, a token,
// and an operator whose account issues .creds files: each auth method connects the way every Triad
// process connects (connectBus, waiting for the server as a service does), and each refusal — no
// credentials, a wrong password, token or nkey, untrusted creds, a missing file, two methods — ends the
// connect at once with a message naming the setting and what to set.
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connectBus, type Bus, type BusOptions } from '@triad/bus';
import { ErrorCode, TriadError } from '@triad/protocol';
import { createAccount } from '@nats-io/nkeys';
import { freePort, startNats, startProcess, uniqueNamespace, waitFor, withTeardown, type NatsServer } from '../harness/index.js';
import { nkeyUser, operatorTrust, untrustedCreds, type NkeyUser } from '../support/nats-identities.js';
import { ROOT, SCRIPTS } from '../support/triad.js';

const td = withTeardown(afterAll);
let dir: string;
let users: NatsServer;
let tokenServer: NatsServer;
let operatorServer: NatsServer;
let nkey: NkeyUser;
let strangerNkey: NkeyUser;
let creds: string;
let stranger: string;

const PASSWORD = 'correct horse';
const TOKEN = 's3cret-token';

/** A file in the test's private directory. */
async function file(name: string, text: string): Promise<string> {
  const path = join(dir, name);
  await writeFile(path, text, { mode: 0o600 });
  return path;
}

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'triad-creds-'));
  td.add(() => rm(dir, { recursive: true, force: true }));
  nkey = nkeyUser();
  strangerNkey = nkeyUser();
  const trust = await operatorTrust();
  creds = await file('user.creds', await trust.userCreds('triad-test-user'));
  stranger = await file('stranger.creds', await untrustedCreds('stranger'));
  [users, tokenServer, operatorServer] = await Promise.all([
    startNats({
      teardown: td,
      config: `authorization {\n  users = [\n    { user: alice, password: "${PASSWORD}" }\n    { nkey: ${nkey.publicKey} }\n  ]\n}\n`,
    }),
    startNats({ teardown: td, config: `authorization {\n  token: "${TOKEN}"\n}\n` }),
    startNats({ teardown: td, config: trust.config }),
  ]);
});

/** Connects as a service does (no failFast: it would wait for a server that is down) and proves JetStream answers. */
async function connected(o: Omit<BusOptions, 'namespace' | 'name'>): Promise<Bus> {
  const bus = await connectBus({ ...o, namespace: uniqueNamespace('creds'), name: 'creds-test' });
  td.add(() => bus.close());
  await bus.jsm.getAccountInfo();
  return bus;
}

async function refusal(o: Omit<BusOptions, 'namespace' | 'name'>): Promise<TriadError> {
  try {
    const bus = await connectBus({ ...o, namespace: uniqueNamespace('creds'), name: 'creds-test' });
    await bus.close();
  } catch (e) {
    expect(e).toBeInstanceOf(TriadError);
    expect((e as TriadError).code).toBe(ErrorCode.InvalidConfig);
    return e as TriadError;
  }
  throw new Error(`connected with ${JSON.stringify(o)}`);
}

describe('NATS credentials: each auth method connects', () => {
  it('user and password', async () => {
    await connected({ url: users.url, user: 'alice', password: PASSWORD });
  });

  it('an nkey seed file (a file that also lists the public key works too)', async () => {
    await connected({ url: users.url, nkeySeed: await file('nkey.seed', `${nkey.seed}\n`) });
    await connected({ url: users.url, nkeySeed: await file('nkey.both', `${nkey.seed}\n${nkey.publicKey}\n`) });
  });

  it('a token', async () => {
    await connected({ url: tokenServer.url, token: TOKEN });
  });

  it('a .creds file issued by an account the server trusts', async () => {
    await connected({ url: operatorServer.url, creds });
  });

  it('several servers in NATS_URL, the first one down', async () => {
    const down = `nats://127.0.0.1:${await freePort()}`;
    await connected({ url: `${down},${users.url}`, user: 'alice', password: PASSWORD });
  });
});

describe('NATS credentials: refusals end the connect at once, naming the setting', () => {
  it('no credentials: says what to set', async () => {
    const e = await refusal({ url: users.url });
    expect(e.message).toBe(
      `NATS at ${users.url} requires credentials and none were given (authorization violation): set NATS_CREDS, NATS_NKEY_SEED, NATS_USER and NATS_PASSWORD, or NATS_TOKEN`,
    );
  });

  it('a wrong password', async () => {
    const e = await refusal({ url: users.url, user: 'alice', password: 'wrong' });
    expect(e.message).toBe('NATS refused the credentials from NATS_USER/NATS_PASSWORD (user "alice"): authorization violation; check the user name and password');
    expect(e.message).not.toContain('wrong');
  });

  it('a wrong token', async () => {
    const e = await refusal({ url: tokenServer.url, token: 'not-it' });
    expect(e.message).toBe('NATS refused the token from NATS_TOKEN: authorization violation; check the token');
  });

  it('an nkey the server does not list', async () => {
    const seedFile = await file('stranger.seed', strangerNkey.seed);
    const e = await refusal({ url: users.url, nkeySeed: seedFile });
    expect(e.message).toBe(
      `NATS refused the nkey from NATS_NKEY_SEED ("${seedFile}", public key ${strangerNkey.publicKey}): authorization violation; check that the server's authorization lists this public key as a user`,
    );
  });

  it('creds from an account the server does not trust', async () => {
    const e = await refusal({ url: operatorServer.url, creds: stranger });
    expect(e.message).toMatch(new RegExp(`^NATS refused the credentials from NATS_CREDS \\("${stranger}", user U[A-Z2-7]+\\): authorization violation; check that the file is current`));
  });

  it('a missing or malformed file, before connecting', async () => {
    expect((await refusal({ url: users.url, creds: join(dir, 'nope.creds') })).message).toBe(
      `cannot read NATS_CREDS file "${join(dir, 'nope.creds')}" (no such file): set NATS_CREDS to the path of a .creds file (a user JWT and its nkey seed, as \`nsc generate creds\` writes)`,
    );
    const notCreds = await file('not.creds', 'hello\n');
    expect((await refusal({ url: operatorServer.url, creds: notCreds })).message).toMatch(/^NATS_CREDS file ".*not\.creds" is not a NATS credentials file \(unable to parse credentials\)/);
    const empty = await file('empty.seed', '\n');
    expect((await refusal({ url: users.url, nkeySeed: empty })).message).toMatch(/^cannot read NATS_NKEY_SEED file ".*empty\.seed" \(it is empty\)/);
    const accountSeed = await file('account.seed', `${new TextDecoder().decode(createAccount().getSeed())}\n`);
    expect((await refusal({ url: users.url, nkeySeed: accountSeed })).message).toMatch(/holds an nkey seed that is not a user seed \(it must start with "SU"\)/);
  });

  it('two auth methods, before connecting', async () => {
    const e = await refusal({ url: users.url, user: 'alice', password: PASSWORD, token: TOKEN });
    expect(e.message).toBe('invalid NATS connection settings: NATS_USER/NATS_PASSWORD and NATS_TOKEN are both set: a NATS connection uses exactly one auth method; unset all but one');
  });

  it('credentials revoked while connected: the connection ends and onFatal says why', async () => {
    const config = (users: string): string => `authorization {\n  users = [\n${users}  ]\n}\n`;
    const server = await startNats({ teardown: td, config: config('    { user: alice, password: "a" }\n    { user: bob, password: "b" }\n') });
    const fatal: TriadError[] = [];
    const bus = await connectBus({ url: server.url, user: 'bob', password: 'b', namespace: uniqueNamespace('creds'), name: 'revoked', onFatal: (e) => fatal.push(e) });
    td.add(() => bus.close());
    await server.reload(config('    { user: alice, password: "a" }\n'));
    const e = await waitFor(() => fatal[0], { timeoutMs: 20_000, what: 'the connection of the revoked user to end' });
    expect(e.message).toBe('NATS refused the credentials from NATS_USER/NATS_PASSWORD (user "bob"): authorization violation; check the user name and password');
    expect(bus.nc.isClosed()).toBe(true);
  });

  it('a scheduler with a wrong password exits at start, naming the settings', async () => {
    const p = await startProcess({
      name: 'scheduler-wrong-password',
      args: [SCRIPTS.scheduler],
      cwd: ROOT,
      teardown: td,
      env: { NATS_URL: users.url, NATS_USER: 'alice', NATS_PASSWORD: 'wrong', REDIS_URL: 'redis://127.0.0.1:1', TRIAD_NAMESPACE: uniqueNamespace('creds') },
    });
    expect(await p.exited).toBe(1);
    expect(p.output()).toContain('scheduler failed to start: NATS refused the credentials from NATS_USER/NATS_PASSWORD (user "alice"): authorization violation');
  });
});
