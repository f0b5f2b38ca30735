// Starts a real nats-server (JetStream on by default) on free ports with its own store directory, and
// optionally a configuration file (users, tokens, nkeys, an operator, TLS).
import { get } from 'node:http';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePorts, natsServerArgs, requireBinary } from '@triad/launcher';
import { uniqueNamespace } from './namespace.js';
import { natsInfo } from './nats-protocol.js';
import { type ServerControl, ManagedServer } from './server.js';
import type { Teardown } from './teardown.js';
import { waitFor } from './wait.js';

export interface StartNatsOptions {
  /** `-js` with `-sd <dataDir>`; default true. */
  jetstream?: boolean;
  /** Registered (its stop()) as soon as the data directory exists, before the first spawn. */
  teardown?: Teardown;
  /** Per start attempt; default 20 s (JetStream recovers its store before it serves). */
  readyTimeoutMs?: number;
  /**
   * nats-server configuration text (e.g. an `authorization {…}` or `tls {…}` block), written to a file
   * in the data directory and passed with `-c`; the harness's flags (host, ports, name, store) win over it.
   */
  config?: string;
}

/** A nats-server; `signal` also serves nats-server's SIGHUP (reload) and SIGUSR2 (lame-duck mode). */
export interface NatsServer extends ServerControl {
  /** nats://127.0.0.1:PORT — stays the same across restart(). */
  readonly url: string;
  readonly port: number;
  /** http://127.0.0.1:MONITORPORT — /varz, /jsz, /connz, /healthz. */
  readonly monitorUrl: string;
  /** Passed as -sd; nats-server keeps JetStream state in `<dataDir>/jetstream`. */
  readonly dataDir: string;
  readonly serverName: string;
  /**
   * Replaces the `config` text and reloads it (SIGHUP), resolving once the server says it reloaded:
   * e.g. to drop a user while clients are connected.
   */
  reload(config: string): Promise<void>;
}

interface NatsPorts {
  port: number;
  monitorPort: number;
}

const PROBE_TIMEOUT_MS = 1_000;

export async function startNats(opts: StartNatsOptions = {}): Promise<NatsServer> {
  const binary = requireBinary('nats-server');
  const jetstream = opts.jetstream ?? true;
  // Identity check: INFO carries server_name, so an unrelated server on a reused port is never mistaken for ours.
  const serverName = uniqueNamespace('nats');
  const dataDir = await mkdtemp(join(tmpdir(), 'triad-nats-'));
  const configFile = join(dataDir, 'nats-server.conf');
  // With a configuration file, the name and the store go in it too: a reload compares the file with the
  // running settings and refuses to drop a server_name or JetStream that only a flag had set.
  const configText = (config: string): string =>
    [`server_name: "${serverName}"`, ...(jetstream ? [`jetstream {\n  store_dir: "${dataDir}"\n}`] : []), config, ''].join('\n');
  if (opts.config !== undefined) await writeFile(configFile, configText(opts.config), { mode: 0o600 });
  const server = new ManagedServer<NatsPorts>(
    {
      kind: 'nats-server',
      binary,
      readyTimeoutMs: opts.readyTimeoutMs ?? 20_000,
      allocatePorts: async () => {
        const [port, monitorPort] = await freePorts(2);
        if (port === undefined || monitorPort === undefined) throw new Error('freePorts(2) returned too few ports');
        return { port, monitorPort };
      },
      // -a also binds the monitoring listener (its host defaults to the client host), so nothing listens beyond loopback.
      args: ({ port, monitorPort }, dir) =>
        opts.config !== undefined ? natsServerArgs({ port, monitorPort, configFile }) : natsServerArgs({ port, monitorPort, serverName, storeDir: dir, jetstream }),
      probe: async ({ port, monitorPort }) => {
        const info = await natsInfo(`nats://127.0.0.1:${port}`, { timeoutMs: PROBE_TIMEOUT_MS });
        if (info.server_name !== serverName) return false;
        if (!jetstream) return true;
        // The client port can answer INFO before JetStream has finished enabling (store recovery).
        return (await httpStatus(`http://127.0.0.1:${monitorPort}/healthz?js-enabled-only=true`)) === 200;
      },
    },
    dataDir,
  );
  await server.launch(opts.teardown);
  const { port, monitorPort } = server.ports;
  return {
    url: `nats://127.0.0.1:${port}`,
    port,
    monitorUrl: `http://127.0.0.1:${monitorPort}`,
    dataDir,
    serverName,
    ...server.controls(),
    reload: async (config) => {
      if (opts.config === undefined) throw new Error('reload() needs a server started with a `config`');
      const reloaded = (): number => server.log().split('Reloaded server configuration').length;
      const before = reloaded();
      await writeFile(configFile, configText(config));
      server.signal('SIGHUP');
      // A refused configuration ("Failed to reload server configuration: …") shows in the log tail of the timeout.
      await waitFor(() => reloaded() > before, { timeoutMs: 10_000, what: 'nats-server to reload its configuration', lastSeen: () => server.log().slice(-1000) });
    },
  };
}

/** Status code of a GET, without keep-alive (a pooled socket would outlive the probe). */
function httpStatus(url: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const request = get(url, { agent: false, timeout: PROBE_TIMEOUT_MS }, (response) => {
      response.resume();
      resolve(response.statusCode ?? 0);
    });
    request.once('timeout', () => request.destroy(new Error(`GET ${url} timed out after ${PROBE_TIMEOUT_MS}ms`)));
    request.once('error', reject);
  });
}
