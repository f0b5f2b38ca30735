/**
 * The baseline's second process: consumes requests from the REQ work-queue stream and answers each with
 * a publish-with-ack to the REP stream, then acknowledges it — what an agent does for a step, minus
 * Triad. `node apps/bench/dist/baseline-echo.js` (NATS_URL, BENCH_NAMESPACE, BENCH_ECHO_CONCURRENCY).
 */
import { jetstream } from '@nats-io/jetstream';
import { natsOptionsFromEnv } from '@triad/settings';
import { baselineConnection, baselineNames, pump } from './pump.js';

async function main(): Promise<void> {
  const namespace = process.env['BENCH_NAMESPACE'];
  if (!namespace) throw new Error('BENCH_NAMESPACE is not set');
  const concurrency = Number(process.env['BENCH_ECHO_CONCURRENCY'] ?? 32);
  const n = baselineNames(namespace);
  const nc = await baselineConnection(natsOptionsFromEnv(process.env), namespace, 'bench-baseline-echo');
  const js = jetstream(nc, { timeout: 10_000 });
  const consumer = await js.consumers.get(n.reqStream, 'echo');
  const p = await pump(
    consumer,
    concurrency,
    async (m) => {
      // A message id, as Triad puts on every publish that may repeat (the server deduplicates on it).
      await js.publish(n.repSubject, m.data, { msgID: `rep:${m.seq}` });
      m.ack();
    },
    (e) => process.stderr.write(`baseline-echo: ${String(e)}\n`),
  );
  const stop = async (): Promise<void> => {
    await p.stop();
    await nc.drain().catch(() => undefined);
    process.exit(0);
  };
  process.on('SIGTERM', () => void stop());
  process.on('SIGINT', () => void stop());
  process.stdout.write('baseline-echo ready\n');
}

main().catch((e: unknown) => {
  process.stderr.write(`baseline-echo failed: ${e instanceof Error ? e.message : String(e)}\n`);
  process.exit(1);
});
