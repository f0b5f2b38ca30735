// The CLI starts fast: `--version`, `--help` and a usage error load commander and the protocol's plain
// constants, nothing else outside the CLI (no client, NATS, zod or schemas); a command loads those when it
// runs. Checked by what Node resolves (a module hook), not by timing.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';

const CLI = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const BIN = join(CLI, 'bin', 'triad.js');

/** Runs the CLI and returns, besides its output, every module it loaded from outside apps/cli. */
function runTracingLoads(args: string[]): { code: number; stdout: string; loaded: string[] } {
  const dir = mkdtempSync(join(tmpdir(), 'triad-loads-'));
  const hooks = join(dir, 'hooks.mjs');
  writeFileSync(hooks, `export async function resolve(specifier, context, next) {
  const r = await next(specifier, context);
  if (r.url.startsWith('file:')) process.stderr.write('LOADED ' + r.url + '\\n');
  return r;
}
`);
  const register = join(dir, 'register.mjs');
  writeFileSync(register, `import { register } from 'node:module';\nregister(${JSON.stringify(pathToFileURL(hooks).href)});\n`);
  const r = spawnSync(process.execPath, ['--import', pathToFileURL(register).href, BIN, ...args], { encoding: 'utf8', env: { ...process.env, NATS_URL: 'nats://127.0.0.1:1' } });
  const loaded = [
    ...new Set(
      r.stderr
        .split('\n')
        .filter((l) => l.startsWith('LOADED '))
        .map((l) => fileURLToPath(l.slice('LOADED '.length)))
        .filter((f) => !f.startsWith(CLI + '/') || f.includes('/node_modules/')),
    ),
  ];
  return { code: r.status ?? -1, stdout: r.stdout, loaded };
}

/** A loaded file as the package it belongs to: `commander`, `@triad/protocol/dist/constants.js`, … */
function packageOf(file: string): string {
  const nm = file.lastIndexOf('/node_modules/');
  if (nm >= 0) {
    const parts = file.slice(nm + '/node_modules/'.length).split('/');
    return parts[0]?.startsWith('@') ? `${parts[0]}/${parts[1] ?? ''}` : (parts[0] ?? file);
  }
  const m = /\/packages\/([^/]+)\/(.*)$/.exec(file);
  return m ? `@triad/${m[1] ?? ''}/${m[2] ?? ''}` : file;
}

describe('triad starts with what the command needs', () => {
  it('--version prints the package version and loads only commander and the protocol constants', () => {
    const r = runTracingLoads(['--version']);
    expect(r.code).toBe(0);
    const version = (JSON.parse(readFileSync(join(CLI, 'package.json'), 'utf8')) as { version: string }).version;
    expect(r.stdout).toBe(`triad ${version}\n`);
    expect(new Set(r.loaded.map(packageOf))).toEqual(new Set(['commander', '@triad/protocol/dist/constants.js']));
  });

  it('--help and a usage error load no more than that', () => {
    for (const args of [['--help'], ['list', '--help'], ['submit'], ['list', '--status', 'bogus']]) {
      const r = runTracingLoads(args);
      expect(r.code, args.join(' ')).toBe(args.includes('--help') ? 0 : 2);
      expect(new Set(r.loaded.map(packageOf)), args.join(' ')).toEqual(new Set(['commander', '@triad/protocol/dist/constants.js']));
    }
  });

  it('a command that runs loads the client when it runs', () => {
    const r = runTracingLoads(['list', '--request-timeout', '200']);
    expect(r.code).toBe(1);
    expect(r.loaded.map(packageOf)).toContain('@triad/client/dist/index.js');
  });
});
