// How the CLI finds `npm start`'s operator identity: the workspace root is the package.json that declares
// `workspaces` (a workspace's own package.json or turbo.json on the way up does not stop the search —
// issue #21's bug), and each reason not to use the file is said.
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { localOperatorFile, lookupLocalOperator, workspaceRoot } from '../src/local-credentials.js';

function repoLike(): { root: string; cliDist: string } {
  const root = mkdtempSync(join(tmpdir(), 'triad-root-'));
  writeFileSync(join(root, 'package.json'), JSON.stringify({ name: 'triad', workspaces: ['apps/*'] }));
  writeFileSync(join(root, 'turbo.json'), '{}');
  const cli = join(root, 'apps', 'cli');
  mkdirSync(join(cli, 'dist'), { recursive: true });
  // What once stopped the search one level too early.
  writeFileSync(join(cli, 'turbo.json'), '{}');
  writeFileSync(join(cli, 'package.json'), JSON.stringify({ name: '@triad/cli' }));
  return { root, cliDist: join(cli, 'dist') };
}

function withOperator(root: string, natsUrl: string): string {
  mkdirSync(join(root, '.triad', 'auth'), { recursive: true });
  const file = join(root, '.triad', 'auth', 'operator.env');
  writeFileSync(file, `NATS_URL=${natsUrl}\nTRIAD_NAMESPACE=default\nTRIAD_CLIENT_ID=operator\nNATS_NKEY_SEED=${join(root, '.triad', 'auth', 'operator.nk')}\n`);
  return file;
}

describe('workspaceRoot', () => {
  it('is the folder whose package.json declares workspaces, past a workspace with its own turbo.json', () => {
    const { root, cliDist } = repoLike();
    expect(workspaceRoot(cliDist)).toBe(root);
    expect(localOperatorFile(workspaceRoot(cliDist))).toBe(join(root, '.triad', 'auth', 'operator.env'));
  });

  it('is undefined outside any workspace', () => {
    expect(workspaceRoot(mkdtempSync(join(tmpdir(), 'triad-alone-')))).toBeUndefined();
    expect(localOperatorFile(undefined)).toBeUndefined();
  });
});

describe('lookupLocalOperator', () => {
  const url = 'nats://127.0.0.1:4999';

  it('uses the file for its NATS_URL, with its namespace and client id', () => {
    const { root } = repoLike();
    const file = withOperator(root, url);
    const found = lookupLocalOperator({ NATS_URL: url }, file);
    expect(found).toEqual({ used: true, file, settings: { NATS_NKEY_SEED: join(root, '.triad', 'auth', 'operator.nk'), TRIAD_NAMESPACE: 'default', TRIAD_CLIENT_ID: 'operator' } });
  });

  it('says why it does not use it', () => {
    const { root } = repoLike();
    const file = withOperator(root, url);
    expect(lookupLocalOperator({ NATS_URL: url, NATS_TOKEN: 't' }, file)).toMatchObject({ used: false, why: 'NATS_TOKEN is set' });
    expect(lookupLocalOperator({}, file)).toMatchObject({ used: false, why: `it is for NATS_URL=${url}, not nats://127.0.0.1:4222` });
    expect(lookupLocalOperator({ NATS_URL: url, TRIAD_NAMESPACE: 'shop' }, file)).toMatchObject({ used: false, why: 'it is for namespace default, not shop' });
    expect(lookupLocalOperator({ NATS_URL: url }, join(root, 'missing.env'))).toMatchObject({ used: false, why: expect.stringMatching(/missing\.env does not exist/) as unknown });
    expect(lookupLocalOperator({ NATS_URL: url }, undefined)).toMatchObject({ used: false, why: 'the CLI is not run from a Triad repository' });
  });
});
