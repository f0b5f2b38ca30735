/**
 * restate-server for the Restate peer: installed on first use from the npm registry into
 * `.triad/peers/restate-<version>` (TRIAD_RESTATE_SERVER names another binary), started on free ports
 * with its data in the run's scratch directory, with the write-ahead log's fsync on or off.
 */
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { startProcess, type StartedProcess } from '@triad/launcher';
import { REPO_ROOT } from '../actors.js';
import { freePorts } from '../servers.js';
import { sleep } from '../timing.js';

/** The newest restate-server whose protocol the SDK the bench uses (1.9, for Node 20) speaks. */
export const RESTATE_SERVER_VERSION = '1.7.12';
const START_TIMEOUT_MS = 60_000;

function packagedBinary(dir: string): string {
  return join(dir, 'node_modules', '@restatedev', `restate-server-${process.platform}-${process.arch}`, 'bin', 'restate-server');
}

function run(cmd: string, args: string[]): Promise<void> {
  return new Promise((resolve, reject) => {
    const p = spawn(cmd, args, { stdio: ['ignore', 'ignore', 'pipe'] });
    let err = '';
    p.stderr.on('data', (d: Buffer) => void (err += d.toString()));
    p.on('error', reject);
    p.on('exit', (code) => (code === 0 ? resolve() : reject(new Error(`${cmd} ${args.join(' ')} exited with ${code}:\n${err.slice(-2000)}`))));
  });
}

/** The restate-server binary, installing it on first use (~220 MB, once per checkout). */
export async function restateServerBinary(progress: (m: string) => void): Promise<string> {
  const configured = process.env['TRIAD_RESTATE_SERVER'];
  if (configured) {
    if (!existsSync(configured)) throw new Error(`TRIAD_RESTATE_SERVER=${configured} does not exist: point it at a restate-server binary, or unset it to install ${RESTATE_SERVER_VERSION}`);
    return configured;
  }
  const dir = join(REPO_ROOT, '.triad', 'peers', `restate-${RESTATE_SERVER_VERSION}`);
  const bin = packagedBinary(dir);
  if (existsSync(bin)) return bin;
  progress(`restate: installing @restatedev/restate-server@${RESTATE_SERVER_VERSION} into ${dir} (once)`);
  await mkdir(dir, { recursive: true });
  const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
  try {
    await run(npm, ['install', '--no-save', '--no-audit', '--no-fund', '--prefix', dir, `@restatedev/restate-server@${RESTATE_SERVER_VERSION}`]);
  } catch (e) {
    throw new Error(`could not install restate-server (the Restate peer needs it; npm registry reachable?): ${e instanceof Error ? e.message : String(e)}`);
  }
  if (!existsSync(bin)) throw new Error(`@restatedev/restate-server@${RESTATE_SERVER_VERSION} has no binary for ${process.platform}-${process.arch} (${bin}); set TRIAD_RESTATE_SERVER to one`);
  return bin;
}

export interface RestateServer {
  child: StartedProcess;
  ingressUrl: string;
  adminUrl: string;
  stop(): Promise<void>;
}

async function ok(url: string): Promise<boolean> {
  try {
    const r = await fetch(url, { signal: AbortSignal.timeout(1_000) });
    return r.ok;
  } catch {
    return false;
  }
}

export async function startRestateServer(bin: string, dir: string, fsync: boolean): Promise<RestateServer> {
  const [fabric, admin, ingress] = await freePorts(3);
  if (fabric === undefined || admin === undefined || ingress === undefined) throw new Error('no free ports for restate-server');
  await mkdir(dir, { recursive: true });
  const config = join(dir, 'restate.toml');
  // Two partitions for two cores (the default, 24, is for a server); with fsync off, neither log writer
  // (the local loglet nor the log server) syncs its write-ahead log.
  await writeFile(
    config,
    [
      'cluster-name = "triad-bench"',
      'node-name = "bench"',
      'default-num-partitions = 2',
      'disable-telemetry = true',
      `bind-address = "127.0.0.1:${fabric}"`,
      '[admin]',
      `bind-address = "127.0.0.1:${admin}"`,
      '[ingress]',
      `bind-address = "127.0.0.1:${ingress}"`,
      '[log-server]',
      `rocksdb-disable-wal-fsync = ${!fsync}`,
      '[bifrost.local]',
      `rocksdb-disable-wal-fsync = ${!fsync}`,
      '',
    ].join('\n'),
  );
  const child = await startProcess({
    name: 'restate-server',
    command: bin,
    args: ['--config-file', config, '--base-dir', join(dir, 'data'), '--listen-mode', 'tcp', '--no-logo'],
    env: { RESTATE_LOG_FORMAT: 'compact', RESTATE_LOG_DISABLE_ANSI_CODES: 'true' },
  });
  const adminUrl = `http://127.0.0.1:${admin}`;
  const ingressUrl = `http://127.0.0.1:${ingress}`;
  const stop = (): Promise<void> => child.stop(10_000);
  const deadline = Date.now() + START_TIMEOUT_MS;
  for (;;) {
    if (!child.isRunning()) throw new Error(`restate-server exited during start-up; last output:\n${child.tail()}`);
    if ((await ok(`${adminUrl}/health`)) && (await ok(`${ingressUrl}/restate/health`))) break;
    if (Date.now() > deadline) {
      await stop();
      throw new Error(`restate-server was not healthy within ${START_TIMEOUT_MS / 1000} s; last output:\n${child.tail()}`);
    }
    await sleep(200);
  }
  return { child, ingressUrl, adminUrl, stop };
}
