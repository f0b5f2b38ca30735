// Starts a real redis-server (AOF with fsync on every write by default) on a free port with its own directory;
// optionally secured: a password or ACL users, and TLS only.
import { mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort, redisServerArgs, requireBinary } from '@triad/launcher';
import { redisReply } from './resp.js';
import { type ServerControl, ManagedServer } from './server.js';
import type { Teardown } from './teardown.js';

export interface StartRedisOptions {
  /** `--appendonly yes --appendfsync always`, so even a SIGKILL loses no acknowledged write; default true. */
  aof?: boolean;
  /** Registered (its stop()) as soon as the directory exists, before the first spawn. */
  teardown?: Teardown;
  /** Per start attempt; default 20 s. */
  readyTimeoutMs?: number;
  /** `--requirepass`: the default user's password. */
  password?: string;
  /**
   * ACL rules, one user per line (`user alice on >pw ~* +@all`), written to an `--aclfile`. Name in
   * `probeAuth` a user the harness may PING and INFO with.
   */
  aclUsers?: readonly string[];
  /** The login of the harness's own readiness probes; default: the default user with `password`. */
  probeAuth?: { user?: string; password: string };
  /**
   * TLS only (`--port 0 --tls-port`): the server's certificate and key, and the CA (PEM files) its
   * clients trust. Clients need not send a certificate (`--tls-auth-clients no`).
   */
  tls?: { certFile: string; keyFile: string; caFile: string };
  /** More redis-server arguments (e.g. `--cluster-enabled yes`: see startRedisCluster). */
  extraArgs?: readonly string[];
}

/** A redis-server; restart() replays its AOF; while paused, connections are accepted by the kernel but nothing answers. */
export interface RedisServer extends ServerControl {
  /** redis://127.0.0.1:PORT (rediss:// with `tls`), without credentials — stays the same across restart(). */
  readonly url: string;
  readonly port: number;
  /** Passed as --dir; with AOF, Redis 7 keeps its files in `<dir>/appendonlydir`. */
  readonly dir: string;
}

const PROBE_TIMEOUT_MS = 1_000;

export async function startRedis(opts: StartRedisOptions = {}): Promise<RedisServer> {
  const binary = requireBinary('redis-server');
  const aof = opts.aof ?? true;
  const dir = await mkdtemp(join(tmpdir(), 'triad-redis-'));
  const scheme = opts.tls === undefined ? 'redis' : 'rediss';
  let aclFile: string | undefined;
  if (opts.aclUsers !== undefined) {
    aclFile = join(dir, 'users.acl');
    await writeFile(aclFile, `${opts.aclUsers.join('\n')}\n`, { mode: 0o600 });
  }
  const probe = {
    ...(opts.probeAuth !== undefined ? { auth: opts.probeAuth } : opts.password !== undefined ? { auth: { password: opts.password } } : {}),
    ...(opts.tls !== undefined ? { tls: { ca: await readFile(opts.tls.caFile, 'utf8') } } : {}),
  };
  const server = new ManagedServer<{ port: number }>(
    {
      kind: 'redis-server',
      binary,
      readyTimeoutMs: opts.readyTimeoutMs ?? 20_000,
      allocatePorts: async () => ({ port: await freePort() }),
      args: ({ port }, serverDir) =>
        redisServerArgs({
          port,
          dir: serverDir,
          aof: aof ? 'always' : false,
          ...(opts.password !== undefined ? { password: opts.password } : {}),
          ...(aclFile !== undefined ? { aclFile } : {}),
          ...(opts.tls !== undefined ? { tls: opts.tls } : {}),
          ...(opts.extraArgs !== undefined ? { extra: opts.extraArgs } : {}),
        }),
      probe: async ({ port }, pid) => {
        const url = `${scheme}://127.0.0.1:${port}`;
        // -LOADING while the AOF is replayed: not ready yet.
        if ((await redisReply(url, ['PING'], { timeoutMs: PROBE_TIMEOUT_MS, ...probe })) !== 'PONG') return false;
        // Identity check: an unrelated Redis on a reused port would also say PONG.
        const info = await redisReply(url, ['INFO', 'server'], { timeoutMs: PROBE_TIMEOUT_MS, ...probe });
        return typeof info === 'string' && new RegExp(`^process_id:${pid}\\r?$`, 'm').test(info);
      },
    },
    dir,
  );
  await server.launch(opts.teardown);
  const { port } = server.ports;
  return {
    url: `${scheme}://127.0.0.1:${port}`,
    port,
    dir,
    ...server.controls(),
  };
}
