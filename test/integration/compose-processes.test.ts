/**
 * docker-compose.yml run for real, without a Docker engine: every service's command runs as a local
 * process with its Compose environment (hostnames mapped to 127.0.0.1 and distinct free ports, the
 * harness's nats-server and redis-server in place of the images, each replica with its own /tmp),
 * `--scale scheduler=2 --scale agent=3`, depends_on honoured by running the healthchecks themselves.
 * Orders are then completed through the `cli` service's command, as
 * `docker compose run --rm cli submit orders --input ... --wait` would on a fresh `up`, with nothing
 * but the stack's own processes registering the workflow.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SERVICE_ENDPOINTS } from '@triad/example-orders';
import { startNats, startRedis, uniqueNamespace, withTeardown, type NatsServer, type RedisServer } from '../harness/index.js';
import { ComposeFile } from '../support/compose.js';
import { LocalStack } from '../support/compose-stack.js';
import { ROOT } from '../support/triad.js';

const td = withTeardown(afterAll);
const SCALE = { scheduler: 2, agent: 3 };
let nats: NatsServer;
let redis: RedisServer;
let stack: LocalStack;

beforeAll(async () => {
  [nats, redis] = await Promise.all([startNats({ teardown: td }), startRedis({ teardown: td })]);
  const workDir = mkdtempSync(join(tmpdir(), 'triad-compose-'));
  td.add(() => rmSync(workDir, { recursive: true, force: true }));
  // The host environment compose would interpolate from: a namespace of this test's own.
  const compose = ComposeFile.read(join(ROOT, 'docker-compose.yml'), { TRIAD_NAMESPACE: uniqueNamespace('compose'), TRIAD_LOG_LEVEL: 'info' });
  stack = await LocalStack.create({
    compose,
    cwd: ROOT,
    teardown: td,
    standIns: { nats: { 4222: nats.port }, redis: { 6379: redis.port } },
    scale: SCALE,
    workDir,
  });
  await stack.up();
}, 120_000);

/** `docker compose run --rm cli <args>`: resolves with the CLI's exit code and output. */
function cli(args: string[]): ReturnType<LocalStack['run']> {
  return stack.run('cli', args);
}

describe('docker-compose.yml as local processes', () => {
  it('starts two schedulers, three agent hosts, a supervisor and the services', () => {
    expect(stack.processes('scheduler').length).toBe(SCALE.scheduler);
    expect(stack.processes('agent').length).toBe(SCALE.agent);
    expect(stack.processes('supervisor').length).toBe(1);
    expect(stack.processes('services').length).toBe(1);
  });

  it('completes orders through the `cli` service (docker compose run --rm cli submit orders ... --wait)', async () => {
    const orders = ['o1', 'o2', 'o3'];
    const runs = await Promise.all(orders.map((orderId, i) => cli(['submit', 'orders', '--input', JSON.stringify({ orderId, amount: 42 + i }), '--wait', '--json'])));
    runs.forEach((r, i) => {
      expect(r.code, `order ${orders[i]}: triad submit --wait exited ${r.code}\nstdout: ${r.stdout}\nstderr: ${r.stderr}`).toBe(0);
      expect((JSON.parse(r.stdout) as { status: string }).status).toBe('completed');
    });
    // Each of the example's services got its call for each order at the address the agents were given.
    const effects = await Promise.all(
      Object.entries(SERVICE_ENDPOINTS).map(async ([name, endpoint]) => {
        const url = stack.env('agent')[endpoint.urlVariable];
        if (url === undefined) throw new Error(`\`agent\` has no ${endpoint.urlVariable}`);
        const res = await fetch(`${url}/effects`);
        const body = (await res.json()) as { effects: { payload: { orderId?: string } | null; applied: boolean }[] };
        return { name, orderIds: body.effects.filter((e) => e.applied).map((e) => e.payload?.orderId) };
      }),
    );
    for (const { name, orderIds } of effects) expect(orderIds.sort(), `${name} effects`).toEqual(orders);
  }, 180_000);

  it('the agents registered the orders workflow once: one version, equal to orders.workflow.json', async () => {
    const list = await cli(['workflows', '--json']);
    expect(list.code, list.stderr).toBe(0);
    const orders = (JSON.parse(list.stdout) as { name: string; versions: number[] }[]).find((w) => w.name === 'orders');
    expect(orders?.versions, 'three agent hosts started together must leave exactly one version').toEqual([1]);
    const again = await cli(['workflows', 'register', 'apps/example-orders/orders.workflow.json']);
    expect(again.code, again.stderr).toBe(0);
    expect(again.stdout.trim()).toBe('orders v1 already registered');
  }, 120_000);

  it('every service `docker compose up` started passes its healthcheck', async () => {
    for (const name of ['services', 'scheduler', 'supervisor', 'agent']) {
      expect(await stack.healthy(name), `\`${name}\` fails its healthcheck`).toBe(true);
    }
  }, 120_000);
});
