/** Keeps the example's published forms of the orders workflow (orders.workflow.json, the README snippet) equal to the builder's, and the agents' service variables equal to the services'. */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { canonicalJson, validateDefinition } from '@triad/core';
import { MAX_ORDER_LINES, OrderInputSchema, SERVICE_ENDPOINTS, serviceUrlsFromEnv } from '../src/order-agents.js';
import { EXAMPLE_SERVICES, envPrefix } from '../src/services/index.js';
import { ordersWorkflow } from '../src/workflow.js';

const read = (relative: string): string => readFileSync(fileURLToPath(new URL(relative, import.meta.url)), 'utf8');
const REGENERATE =
  `node --input-type=module -e "import('@triad/example-orders').then((m) => process.stdout.write(JSON.stringify(m.ordersWorkflow.toJSON(), null, 2) + '\\n'))" ` +
  '> apps/example-orders/orders.workflow.json   (after npm run build)';

describe('orders.workflow.json', () => {
  const json = JSON.parse(read('../orders.workflow.json')) as unknown;

  it('is the builder\'s document (ordersWorkflow in src/workflow.ts)', () => {
    expect(json, `apps/example-orders/orders.workflow.json differs from ordersWorkflow; regenerate it from the repository root with:\n  ${REGENERATE}`).toEqual(ordersWorkflow.toJSON());
  });

  it('is a valid definition that registers as the same version as the builder\'s (same canonical form)', () => {
    const fromFile = validateDefinition(json);
    expect(canonicalJson(fromFile)).toBe(canonicalJson(ordersWorkflow.build()));
  });
});

describe('ship fans out over the reservation\'s lines', () => {
  it('takes as many lines as an order may have: the agents refuse a longer order before reserving anything', () => {
    const ship = ordersWorkflow.toJSON().steps.find((s) => s.name === 'ship');
    expect(ship).toMatchObject({ forEach: { output: 'reserve.items' }, maxItems: MAX_ORDER_LINES });
    const lines = Array.from({ length: MAX_ORDER_LINES + 1 }, (_x, i) => ({ sku: `s${i}`, qty: 1 }));
    expect(OrderInputSchema.safeParse({ orderId: 'o1', amount: 1, items: lines.slice(1) }).success).toBe(true);
    const refused = OrderInputSchema.safeParse({ orderId: 'o1', amount: 1, items: lines });
    expect(refused.error?.issues[0]?.message).toBe(`an order has at most ${MAX_ORDER_LINES} lines (items); split a larger order`);
  });
});

describe('the README', () => {
  it('shows the real orders workflow, as src/workflow.ts builds it', () => {
    const source = read('../src/workflow.ts');
    const start = source.indexOf("workflow('orders')");
    const end = source.indexOf(';\n', start); // the statement's end (a ';' may occur inside the description)
    expect(start, "src/workflow.ts no longer has workflow('orders'): update this test").toBeGreaterThanOrEqual(0);
    const squash = (text: string): string => text.replace(/\s+/g, ' ');
    const chain = squash(source.slice(start, end + 1));
    expect(squash(read('../../../README.md')), `README.md must show the orders workflow as src/workflow.ts defines it:\n${chain}`).toContain(chain);
  });
});

describe('SERVICE_ENDPOINTS', () => {
  it('names the variables the example services listen on (services/main.ts), with the same default ports', () => {
    const fromServices = EXAMPLE_SERVICES.map((s) => ({ name: s.name, portVariable: `${envPrefix(s.name)}_PORT`, defaultPort: s.defaultPort })).sort((a, b) => a.name.localeCompare(b.name));
    const fromAgents = Object.entries(SERVICE_ENDPOINTS)
      .map(([name, e]) => ({ name, portVariable: e.portVariable, defaultPort: e.defaultPort }))
      .sort((a, b) => a.name.localeCompare(b.name));
    expect(fromAgents).toEqual(fromServices);
  });

  it('is exactly what serviceUrlsFromEnv reads', () => {
    const read = new Set<string>();
    serviceUrlsFromEnv(new Proxy<NodeJS.ProcessEnv>({}, { get: (_t, key) => (typeof key === 'string' && read.add(key), undefined) }));
    const listed = Object.values(SERVICE_ENDPOINTS).flatMap((e) => [e.urlVariable, e.portVariable]);
    expect([...read].sort()).toEqual(listed.sort());
  });

  it('a URL wins over a port; a port alone means 127.0.0.1', () => {
    expect(serviceUrlsFromEnv({ FRAUD_URL: 'http://services:7104', FRAUD_PORT: '9', INVENTORY_PORT: '9101' })).toMatchObject({ fraud: 'http://services:7104', inventory: 'http://127.0.0.1:9101', payment: 'http://127.0.0.1:7102' });
  });
});
