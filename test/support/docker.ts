// A Docker engine for the container tests: Debian's docker.io (Engine), docker-compose (Compose v1) and
// mmdebstrap (for the stand-in base images) installed with apt-get when missing (as root, as in CI), and
// dockerd started when no engine answers — stopped again at teardown, as every server a test starts.
import { execFile, spawnSync } from 'node:child_process';
import { startProcess, waitFor, type Teardown } from '../harness/index.js';

/** Debian's packages the container tests need. */
export const DOCKER_PACKAGES = ['docker.io', 'docker-compose', 'mmdebstrap'] as const;
const INSTALL = `apt-get install -y ${DOCKER_PACKAGES.join(' ')}`;

/** What each package puts on the PATH. */
const PROVIDES: readonly { what: string; command: string; args: string[] }[] = [
  { what: 'dockerd (docker.io)', command: 'dockerd', args: ['--version'] },
  { what: 'the docker client (docker.io)', command: 'docker', args: ['--version'] },
  { what: 'docker-compose', command: 'docker-compose', args: ['--version'] },
  { what: 'mmdebstrap', command: 'mmdebstrap', args: ['--version'] },
];

export interface CommandResult {
  code: number;
  /** stdout then stderr. */
  output: string;
  stdout: string;
}

export function run(cmd: string, args: readonly string[], o: { env?: NodeJS.ProcessEnv; cwd?: string; timeoutMs?: number } = {}): Promise<CommandResult> {
  return new Promise((resolve) => {
    execFile(cmd, args, { env: o.env ?? process.env, ...(o.cwd ? { cwd: o.cwd } : {}), timeout: o.timeoutMs ?? 600_000, maxBuffer: 64 * 1024 * 1024 }, (error, stdout, stderr) => {
      const code = error ? (typeof error.code === 'number' ? error.code : 1) : 0;
      resolve({ code, stdout, output: `${stdout}${stderr}${error && code !== 0 && !stderr ? error.message : ''}` });
    });
  });
}

const tail = (s: string, lines = 15): string => s.trim().split('\n').slice(-lines).join('\n');

function missing(): string[] {
  return PROVIDES.filter((p) => spawnSync(p.command, p.args, { stdio: 'ignore' }).status !== 0).map((p) => p.what);
}

/** Installs docker.io, docker-compose and mmdebstrap when any is missing; throws saying what and how otherwise. */
export async function ensureDockerPackages(): Promise<{ installed: boolean }> {
  if (missing().length === 0) return { installed: false };
  const needed = missing().join(', ');
  if (process.getuid?.() !== 0) {
    throw new Error(`the container tests need ${needed}, and this user cannot install them (not root). Install them: ${INSTALL}`);
  }
  // Another test file may hold apt's lock: wait for it rather than fail.
  const apt = (args: string[]): Promise<CommandResult> =>
    run('apt-get', ['-o', 'DPkg::Lock::Timeout=600', ...args], { env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' }, timeoutMs: 15 * 60_000 });
  let r = await apt(['install', '-y', '--no-install-recommends', ...DOCKER_PACKAGES]);
  if (r.code !== 0) {
    // Most often the package lists are missing or stale (a fresh machine): refresh them and try once more.
    const update = await apt(['update']);
    r = update.code === 0 ? await apt(['install', '-y', '--no-install-recommends', ...DOCKER_PACKAGES]) : update;
  }
  if (r.code !== 0 || missing().length > 0) {
    throw new Error(`installing Docker for the container tests failed (${needed} missing; \`${INSTALL}\` exited ${r.code}):\n${tail(r.output)}\nInstall them by hand and run the tests again.`);
  }
  return { installed: true };
}

async function engineAnswers(): Promise<boolean> {
  return (await run('docker', ['info', '--format', '{{.ServerVersion}}'], { timeoutMs: 20_000 })).code === 0;
}

export interface DockerEngine {
  /** True when this test installed the packages. */
  installed: boolean;
  /** True when this test started dockerd (and its teardown stops it). */
  started: boolean;
  /** The engine's version. */
  version: string;
}

/**
 * A Docker engine that answers: the packages installed if missing, and dockerd started if no engine
 * answers. The teardown stops a dockerd it started — unless containers it did not start still run on it
 * (another run's), which it leaves alone, saying so.
 */
export async function ensureDocker(td: Teardown): Promise<DockerEngine> {
  const { installed } = await ensureDockerPackages();
  let started = false;
  if (!(await engineAnswers())) {
    if (process.getuid?.() !== 0) throw new Error('no Docker engine answers and this user cannot start dockerd (not root): start it (dockerd &) and run the tests again');
    const dockerd = await startProcess({ name: 'dockerd', command: 'dockerd', args: [] });
    started = true;
    td.add(async () => {
      const others = await run('docker', ['ps', '-q'], { timeoutMs: 20_000 });
      if (others.code === 0 && others.output.trim() !== '') {
        process.stderr.write(`container tests: leaving dockerd (pid ${dockerd.pid}) running: containers this test did not start run on it (${others.output.trim().split('\n').length})\n`);
        return;
      }
      await dockerd.stop(60_000);
    });
    await waitFor(async () => (dockerd.isRunning() ? engineAnswers() : Promise.reject(new Error(`dockerd exited:\n${dockerd.tail()}`))), {
      timeoutMs: 90_000,
      intervalMs: 500,
      what: 'dockerd to answer `docker info`',
      lastSeen: () => dockerd.tail(2_000),
    });
  }
  const version = (await run('docker', ['version', '--format', '{{.Server.Version}}'])).output.trim();
  return { installed, started, version };
}
