// NATS identities for tests with a secured nats-server: nkey users (a seed for the client, the public key
// for the server's authorization block) and an operator whose account issues user JWTs (.creds files),
// with the configuration that makes a server trust them.
import { createAccount, createOperator, createUser, encodeAccount, encodeOperator, encodeUser, fmtCreds } from '@nats-io/jwt';

export interface NkeyUser {
  /** "SU…": what NATS_NKEY_SEED's file holds. */
  seed: string;
  /** "U…": what the server's `authorization { users = [{ nkey: … }] }` lists. */
  publicKey: string;
}

export function nkeyUser(): NkeyUser {
  const kp = createUser();
  return { seed: new TextDecoder().decode(kp.getSeed()), publicKey: kp.getPublicKey() };
}

/** An operator with a system account and one application account (JetStream enabled, no limits). */
export interface OperatorTrust {
  /** nats-server configuration: the operator, the system account and a preloaded memory resolver. */
  config: string;
  /** The text of a .creds file for a new user of the account (what NATS_CREDS's file holds). */
  userCreds(name: string): Promise<string>;
}

const UNLIMITED = {
  subs: -1,
  conn: -1,
  leaf: -1,
  data: -1,
  payload: -1,
  imports: -1,
  exports: -1,
  wildcards: true,
  mem_storage: -1,
  disk_storage: -1,
  streams: -1,
  consumer: -1,
};

export async function operatorTrust(): Promise<OperatorTrust> {
  const operator = createOperator();
  const system = createAccount();
  const account = createAccount();
  const operatorJwt = await encodeOperator('triad-test-operator', operator, { system_account: system.getPublicKey() });
  const systemJwt = await encodeAccount('SYS', system, {}, { signer: operator });
  const accountJwt = await encodeAccount('TRIAD', account, { limits: UNLIMITED }, { signer: operator });
  return {
    config: [
      `operator: ${operatorJwt}`,
      `system_account: ${system.getPublicKey()}`,
      'resolver: MEMORY',
      'resolver_preload: {',
      `  ${system.getPublicKey()}: ${systemJwt}`,
      `  ${account.getPublicKey()}: ${accountJwt}`,
      '}',
      '',
    ].join('\n'),
    userCreds: async (name) => {
      const user = createUser();
      return new TextDecoder().decode(fmtCreds(await encodeUser(name, user, account), user));
    },
  };
}

/** A .creds file for a user of an account no server here trusts (its operator is unknown). */
export async function untrustedCreds(name: string): Promise<string> {
  const account = createAccount();
  const user = createUser();
  return new TextDecoder().decode(fmtCreds(await encodeUser(name, user, account), user));
}
