// Makes a private certificate authority for TLS tests with the openssl command: a CA, a server certificate
// for 127.0.0.1/localhost, a client certificate, and a second, unrelated CA to be distrusted.
import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type { Teardown } from './teardown.js';

const run = promisify(execFile);

/** PEM files in a private directory. */
export interface TestPki {
  readonly dir: string;
  /** The CA certificate clients and servers trust. */
  readonly ca: string;
  /** Signed by `ca`: subjectAltName IP:127.0.0.1 and DNS:localhost, for servers. */
  readonly serverCert: string;
  readonly serverKey: string;
  /** Signed by `ca`, for clients (mutual TLS). */
  readonly clientCert: string;
  readonly clientKey: string;
  /** Another CA, which signed nothing the servers use: trusting it instead of `ca` must fail. */
  readonly otherCa: string;
  /** Signed by `otherCa`, for clients: a server trusting only `ca` must refuse it. */
  readonly strangerCert: string;
  readonly strangerKey: string;
}

async function openssl(args: string[], cwd: string): Promise<void> {
  try {
    await run('openssl', args, { cwd });
  } catch (error) {
    const e = error as { stderr?: string; code?: unknown; message: string };
    if (e.code === 'ENOENT') throw new Error('openssl is required by the TLS tests but is not on PATH (Debian/Ubuntu: apt-get install -y openssl)');
    throw new Error(`openssl ${args.slice(0, 2).join(' ')} failed: ${e.stderr ?? e.message}`);
  }
}

/** A self-signed CA (name.pem, name-key.pem). */
async function makeCa(dir: string, name: string, subject: string): Promise<void> {
  await openssl(
    ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-keyout', `${name}-key.pem`, '-out', `${name}.pem`, '-days', '2',
      '-subj', subject, '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign,cRLSign'],
    dir,
  );
}

/** A key and a certificate for `name`, signed by CA `ca`, with the given extensions. */
async function makeLeaf(dir: string, ca: string, name: string, subject: string, extensions: string): Promise<void> {
  await writeFile(join(dir, `${name}.ext`), extensions);
  await openssl(['req', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-keyout', `${name}-key.pem`, '-out', `${name}.csr`, '-subj', subject], dir);
  await openssl(
    ['x509', '-req', '-in', `${name}.csr`, '-CA', `${ca}.pem`, '-CAkey', `${ca}-key.pem`, '-set_serial', String(Date.now()), '-out', `${name}.pem`, '-days', '2', '-extfile', `${name}.ext`],
    dir,
  );
}

/** Creates the certificates in a new temporary directory, removed by `teardown`. */
export async function makeTestPki(teardown?: Teardown): Promise<TestPki> {
  const dir = await mkdtemp(join(tmpdir(), 'triad-pki-'));
  teardown?.add(() => rm(dir, { recursive: true, force: true }));
  await makeCa(dir, 'ca', '/CN=Triad test CA');
  await makeCa(dir, 'other-ca', '/CN=Unrelated test CA');
  await makeLeaf(dir, 'ca', 'server', '/CN=localhost', 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n');
  await makeLeaf(dir, 'ca', 'client', '/CN=triad-client', 'extendedKeyUsage=clientAuth\n');
  await makeLeaf(dir, 'other-ca', 'stranger', '/CN=stranger', 'extendedKeyUsage=clientAuth\n');
  const at = (file: string): string => join(dir, file);
  return {
    dir,
    ca: at('ca.pem'),
    serverCert: at('server.pem'),
    serverKey: at('server-key.pem'),
    clientCert: at('client.pem'),
    clientKey: at('client-key.pem'),
    otherCa: at('other-ca.pem'),
    strangerCert: at('stranger.pem'),
    strangerKey: at('stranger-key.pem'),
  };
}
