// Makes the Go examples (examples/go) runnable by the tests: installs Debian's Go packages when they are
// missing (as root, as in CI), then builds the agent and the client into a scratch directory.
import { execFile, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Teardown } from '../harness/index.js';
import { ROOT } from './triad.js';

/** Debian's packages the examples build with: the toolchain, nats.go and msgpack v5 (GOPATH mode). */
export const GO_PACKAGES = ['golang-go', 'golang-github-nats-io-go-nats-dev', 'golang-github-vmihailenco-msgpack.v5-dev'] as const;

/** What each package puts where the build looks for it. */
const PROVIDES: readonly { what: string; present: () => boolean }[] = [
  { what: 'the go command', present: () => spawnSync('go', ['version'], { stdio: 'ignore' }).status === 0 },
  { what: 'nats.go in /usr/share/gocode', present: () => existsSync('/usr/share/gocode/src/github.com/nats-io/nats.go/js.go') },
  { what: 'msgpack v5 in /usr/share/gocode', present: () => existsSync('/usr/share/gocode/src/github.com/vmihailenco/msgpack/v5/decode.go') },
];

const INSTALL = `apt-get install -y ${GO_PACKAGES.join(' ')}`;

function run(cmd: string, args: readonly string[], env: Record<string, string> = {}, timeoutMs = 600_000): Promise<{ code: number; output: string }> {
  return new Promise((resolve) => {
    execFile(cmd, args, { cwd: ROOT, env: { ...process.env, ...env }, timeout: timeoutMs, maxBuffer: 16 * 1024 * 1024 }, (error, stdout, stderr) => {
      const code = error ? (typeof error.code === 'number' ? error.code : 1) : 0;
      resolve({ code, output: `${stdout}${stderr}${error && code === 1 && !stderr ? error.message : ''}` });
    });
  });
}

const tail = (s: string): string => s.trim().split('\n').slice(-15).join('\n');

/** Installs the Go packages when any is missing; throws saying what is missing and how to install it. */
export async function ensureGoPackages(): Promise<void> {
  const missing = (): string[] => PROVIDES.filter((p) => !p.present()).map((p) => p.what);
  if (missing().length === 0) return;
  const needed = missing().join(', ');
  if (process.getuid?.() !== 0) {
    throw new Error(`the Go examples need ${needed}, and this user cannot install them (not root). Install them: ${INSTALL}`);
  }
  // Two test files may install at once: apt waits for the other's lock instead of failing.
  const apt = (args: string[]): Promise<{ code: number; output: string }> =>
    run('apt-get', ['-o', 'DPkg::Lock::Timeout=600', ...args], { DEBIAN_FRONTEND: 'noninteractive' });
  let r = await apt(['install', '-y', '--no-install-recommends', ...GO_PACKAGES]);
  if (r.code !== 0) {
    // Most often the package lists are missing or stale (a fresh container): refresh them and try once more.
    const update = await apt(['update']);
    r = update.code === 0 ? await apt(['install', '-y', '--no-install-recommends', ...GO_PACKAGES]) : update;
  }
  if (r.code !== 0 || missing().length > 0) {
    throw new Error(`installing the Go packages for the Go examples failed (${needed} missing; \`${INSTALL}\` exited ${r.code}):\n${tail(r.output)}\nInstall them by hand and run the tests again.`);
  }
}

export interface GoExamples {
  /** The agent binary (examples/go/agent). */
  agent: string;
  /** The client binary (examples/go/client). */
  client: string;
}

/** Installs what is missing, then builds examples/go into a scratch directory the teardown removes. */
export async function buildGoExamples(td: Teardown): Promise<GoExamples> {
  await ensureGoPackages();
  const dir = mkdtempSync(join(tmpdir(), 'triad-go-'));
  td.add(() => rmSync(dir, { recursive: true, force: true }));
  const r = await run('sh', [join(ROOT, 'examples/go/build.sh'), dir]);
  if (r.code !== 0) throw new Error(`building the Go examples (sh examples/go/build.sh ${dir}) failed with exit code ${r.code}:\n${tail(r.output)}`);
  return { agent: join(dir, 'triad-go-agent'), client: join(dir, 'triad-go-client') };
}
