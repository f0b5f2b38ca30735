// What a new user has: a fresh copy of the repository (the files git would give them, no node_modules,
// no build output, no .triad/) and a shell environment without the test runner's or Triad's settings.
// Tests of a user's path (the README's commands) run there, with only the settings a user would set.
import { execFile, execFileSync } from 'node:child_process';
import { copyFileSync, existsSync, lstatSync, mkdirSync, mkdtempSync, readlinkSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { releaseScratchDir, trackScratchDir } from '@triad/launcher';
import type { Teardown } from '../harness/index.js';
import { ROOT } from './triad.js';

/**
 * A copy of the repository as a clone of it would be: every file git tracks or would track (the
 * working tree's, uncommitted edits included), nothing it ignores. Removed at teardown.
 */
export function freshCheckout(td: Teardown, label = 'checkout'): string {
  if (!existsSync(join(ROOT, '.git'))) throw new Error(`${ROOT} is not a git working tree: a fresh checkout is copied from git's file list (git clone the repository to run this test)`);
  const files = execFileSync('git', ['ls-files', '-z', '--cached', '--others', '--exclude-standard'], { cwd: ROOT, maxBuffer: 64 * 1024 * 1024 })
    .toString('utf8')
    .split('\0')
    .filter((f) => f !== '');
  const dir = mkdtempSync(join(tmpdir(), `triad-${label}-`));
  trackScratchDir(dir);
  td.add(async () => {
    const { rm } = await import('node:fs/promises');
    await rm(dir, { recursive: true, force: true, maxRetries: 3 });
    releaseScratchDir(dir);
  });
  for (const f of files) {
    const from = join(ROOT, f);
    // Listed but deleted in the working tree: a clone made now would not have it either.
    if (!existsSync(from) && !isSymlink(from)) continue;
    const to = join(dir, f);
    mkdirSync(dirname(to), { recursive: true });
    if (isSymlink(from)) symlinkSync(readlinkSync(from), to);
    else copyFileSync(from, to);
  }
  return dir;
}

/**
 * A fresh checkout that is already installed and built: the working tree's files as in freshCheckout,
 * plus this repository's build output (`dist/`) copied and its `node_modules` hard-linked (read only;
 * the workspace links inside are relative, so they resolve into the copy). For tests of what a built
 * repository does on its own (an upgrade of npm start's data, say) — not of `npm ci` or `npm start`'s
 * build, which readme-flow.test.ts runs for real.
 */
export function builtCheckout(td: Teardown, label = 'built'): string {
  const dir = freshCheckout(td, label);
  const workspaces = execFileSync('git', ['ls-files', '-z', '--cached', '--others', '--exclude-standard', '*/package.json', 'package.json'], { cwd: ROOT })
    .toString('utf8')
    .split('\0')
    .filter((f) => f !== '')
    .map((f) => dirname(f));
  for (const ws of workspaces) {
    for (const part of ['dist', 'node_modules']) {
      const from = join(ROOT, ws, part);
      if (!existsSync(from)) continue;
      // Hard links for node_modules (never written to), a real copy of the build output.
      execFileSync('cp', [part === 'node_modules' ? '-al' : '-a', from, join(dir, ws, part)]);
    }
  }
  return dir;
}

function isSymlink(path: string): boolean {
  try {
    return lstatSync(path).isSymbolicLink();
  } catch {
    return false;
  }
}

/** Variables a user's new shell does not have: the test runner's, npm's, and every setting of Triad's. */
const NOT_A_USERS = [/^VITEST/, /^TEST$/, /^NODE_ENV$/, /^npm_/i, /^INIT_CWD$/, /^TRIAD_/, /^NATS_/, /^REDIS_/, /^OTEL_/, /^(INVENTORY|PAYMENT|SHIPPING|FRAUD|LEDGER)_/, /^SERVICES_HOST$/, /^ORDERS_/];

/** A new shell's environment (PATH, HOME, …) plus exactly the `settings` a user would type. */
export function userShell(settings: Record<string, string> = {}): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) if (v !== undefined && !NOT_A_USERS.some((re) => re.test(k))) env[k] = v;
  return { ...env, ...settings };
}

export interface ShellResult {
  stdout: string;
  stderr: string;
  /** The exit code; 1 with `signal` set when a signal (the timeout's SIGTERM) ended it. */
  code: number;
  signal?: string;
}

/** Runs a command line in a shell, as a user types it, in `cwd` with exactly `env`. Never rejects; killed after `timeoutMs`. */
export function shell(cwd: string, env: Record<string, string>, line: string, timeoutMs = 120_000): Promise<ShellResult> {
  return new Promise((resolve) => {
    execFile('/bin/sh', ['-c', line], { cwd, env, timeout: timeoutMs, maxBuffer: 16 * 1024 * 1024 }, (error, stdout, stderr) => {
      if (!error) return resolve({ stdout, stderr, code: 0 });
      const code = typeof error.code === 'number' ? error.code : 1;
      resolve({ stdout, stderr, code, ...(error.signal ? { signal: error.signal } : {}) });
    });
  });
}
