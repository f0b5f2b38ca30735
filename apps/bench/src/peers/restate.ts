/**
 * Restate on this machine: restate-server (fsync on or off) and the service endpoint as processes of
 * their own, the deployment registered through the admin API, and each task one request-response call
 * to `chain.run` through the ingress (its answer is how the caller learns the task ended).
 */
import { join } from 'node:path';
import { startProcess } from '@triad/launcher';
import { REPO_ROOT } from '../actors.js';
import { freePorts } from '../servers.js';
import { packageVersion, type PeerRunOptions, type PeerSystem } from './peer.js';
import { restateServerBinary, startRestateServer, RESTATE_SERVER_VERSION } from './restate-server.js';

const READY_TIMEOUT_MS = 30_000;
/** Calls in flight during the throughput run: each holds an HTTP connection until its chain ends. */
const MAX_IN_FLIGHT = 256;
/** Tries of one call whose connection fails, or that gets no answer in CALL_TIMEOUT_MS. */
const CALL_ATTEMPTS = 3;
/**
 * How long one call may wait for its answer before it is sent again. A 3-step chain takes tens of ms
 * even at 256 in flight; without a bound, a call Restate never answers waits for undici's 300 s headers
 * timeout, and the run reports a throughput a hundred times too low (seen once in a fsync-off run).
 */
const CALL_TIMEOUT_MS = 10_000;

export async function startRestate(o: PeerRunOptions, fsync: boolean): Promise<PeerSystem> {
  const bin = await restateServerBinary(o.progress);
  const server = await startRestateServer(bin, join(o.tmpDir, fsync ? 'restate-fsync' : 'restate-nofsync'), fsync);
  const [port] = await freePorts(1);
  const endpoint = await startProcess({ name: 'restate-endpoint', args: [join(REPO_ROOT, 'apps/bench/dist/peers/restate-endpoint.js')], env: { RESTATE_ENDPOINT_PORT: String(port) } }).catch(async (e: unknown) => {
    await server.stop();
    throw e;
  });
  const stop = async (): Promise<void> => {
    await Promise.all([endpoint.stop(5_000), server.stop()]);
  };
  try {
    await endpoint.waitForOutput(/restate-endpoint ready/, READY_TIMEOUT_MS);
    const r = await fetch(`${server.adminUrl}/deployments`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ uri: `http://127.0.0.1:${port}` }),
    });
    if (!r.ok) throw new Error(`registering the Restate endpoint failed: HTTP ${r.status} ${await r.text()}`);
  } catch (e) {
    await stop();
    throw e;
  }
  let resent = 0;
  return {
    label: `Restate ${RESTATE_SERVER_VERSION} (SDK ${packageVersion('@restatedev/restate-sdk')}), ${o.steps} durable calls per task, fsync ${fsync ? 'on' : 'off'}, 2 partitions`,
    processes: [
      { name: 'restate-server', pid: server.child.pid },
      { name: 'restate endpoint', pid: endpoint.pid },
    ],
    maxInFlight: MAX_IN_FLIGHT,
    resent: () => resent,
    runTask: async (id, steps) => {
      // A call whose connection failed before an answer (the ingress under a burst, rarely) is sent again.
      // Without an idempotency key — it would add Restate's deduplication work to every call measured —
      // so such a chain may run twice: harmless for no-op steps, and counted as one task.
      for (let attempt = 1; ; attempt++) {
        let r: Response;
        try {
          r = await fetch(`${server.ingressUrl}/chain/run`, {
            method: 'POST',
            headers: { 'content-type': 'application/json' },
            body: JSON.stringify(steps),
            signal: AbortSignal.timeout(CALL_TIMEOUT_MS),
          });
        } catch (e) {
          if (attempt < CALL_ATTEMPTS) {
            resent++;
            continue;
          }
          const cause = e instanceof Error && e.cause instanceof Error ? `: ${e.cause.message}` : '';
          throw new Error(`Restate task ${id}: ${e instanceof Error ? e.message : String(e)}${cause} (${CALL_ATTEMPTS} attempts)`, { cause: e });
        }
        const body = await r.text();
        if (!r.ok) throw new Error(`Restate task ${id}: HTTP ${r.status} ${body}`);
        return;
      }
    },
    stop,
  };
}
