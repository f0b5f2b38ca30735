// The dashboard in a real browser (chromium through playwright-core) against the example on real NATS
// and Redis: a task appears and completes live, its page shows its steps and attempts, a slow one is
// cancelled, a failed step is retried from the alerts page; a client-role identity (NATS permissions per
// decision 0016) sees only its own tasks (0017), gets no action buttons and its server refuses actions. Saves the README's screenshots.
import { mkdir } from 'node:fs/promises';
import { request as httpRequest } from 'node:http';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { BrowserContext, Page } from 'playwright-core';
import { TriadClient, clientOptionsFromEnv } from '@triad/client';
import { ordersWorkflow } from '@triad/example-orders';
import { clientIdentity } from '@triad/permissions';
import { startNats, startProcess, startRedis, uniqueNamespace, waitFor, withTeardown, type ActorProcess, type NatsServer, type RedisServer } from '../harness/index.js';
import { launchBrowser } from '../support/browser.js';
import { ROOT, SCRIPTS, fastOrders, startTriad, type TestTriad } from '../support/triad.js';

const td = withTeardown(afterAll);
const ns = uniqueNamespace('dash');
// The README's screenshots are refreshed with TRIAD_UPDATE_SCREENSHOTS=1; otherwise a run writes them under
// .triad/ (still taken, so a page that cannot render fails the test) and leaves the checkout clean.
const IMAGES = process.env['TRIAD_UPDATE_SCREENSHOTS'] === '1' ? join(ROOT, 'docs', 'images') : join(ROOT, '.triad', 'screenshots');
let nats: NatsServer;
let redis: RedisServer;
let triad: TestTriad;
let browser: BrowserContext;
let operatorUrl: string;
let viewerUrl: string;
let operatorHealthUrl: string;

/** A client identity's permissions as `triad auth init` writes them (decision 0016): its own tasks only (0017). */
function viewerPermissions(client: string): string {
  const id = clientIdentity(ns, client);
  const list = (xs: string[]): string => `[${xs.map((x) => JSON.stringify(x)).join(', ')}]`;
  return `permissions: { publish: { allow: ${list(id.nats.publish)} }, subscribe: { allow: ${list(id.nats.subscribe)} } }`;
}

async function startDashboard(name: string, env: Record<string, string>, args: string[] = []): Promise<{ url: string; process: ActorProcess }> {
  const p = await startProcess({
    name,
    args: [SCRIPTS.cli, 'dashboard', '--port', '0', ...args],
    env: { ...triad.env, ...env },
    cwd: ROOT,
    readyPattern: /dashboard at http/,
    teardown: td,
  });
  const line = await p.waitForOutput(/dashboard at (http\S+)/);
  return { url: /dashboard at (http\S+)/.exec(line)?.[1] ?? '', process: p };
}

beforeAll(async () => {
  [nats, redis] = await Promise.all([
    startNats({
      teardown: td,
      config: [
        'authorization {',
        '  users = [',
        '    { user: actors, password: "actors-secret" }',
        '    { user: operator, password: "operator-secret" }',
        `    { user: viewer, password: "viewer-secret", ${viewerPermissions('viewer')} }`,
        '  ]',
        '}',
      ].join('\n'),
    }),
    startRedis({ teardown: td }),
  ]);
  triad = await startTriad(td, { nats, redis }, { namespace: ns, env: { NATS_USER: 'actors', NATS_PASSWORD: 'actors-secret' } });
  // A strict variant: one failure is an Error with an alert (no undo), for the alerts page.
  await triad.client.registerWorkflow({
    ...fastOrders({ budgetMs: 2_000, retry: { maxAttempts: 1, initialDelayMs: 10, maxDelayMs: 10 }, ladder: { retries: 0, maxFailures: 1, longBackoffMs: 100 } }),
    name: 'orders-strict',
  });
  const [operator, viewer] = await Promise.all([
    startDashboard('dashboard-operator', { NATS_USER: 'operator', NATS_PASSWORD: 'operator-secret', TRIAD_CLIENT_ID: 'ops' }, ['--http-port', '0']),
    startDashboard('dashboard-viewer', { NATS_USER: 'viewer', NATS_PASSWORD: 'viewer-secret', TRIAD_CLIENT_ID: 'viewer' }),
  ]);
  operatorUrl = operator.url;
  viewerUrl = viewer.url;
  operatorHealthUrl = /metrics and health at (http:\/\/\S+)\/metrics/.exec(operator.process.output())?.[1] ?? '';
  expect(operator.process.output()).toContain('operator: actions enabled');
  expect(viewer.process.output()).toContain('read-only');
  browser = await launchBrowser(td);
  await mkdir(IMAGES, { recursive: true });
}, 240_000);

/** The pages opened so far: each holds a live stream, and Chromium keeps at most 6 connections to one host. */
const pages: Page[] = [];

/** Opens a page at `url`, closing the ones opened before (tests use one page at a time). */
async function open(url: string): Promise<Page> {
  for (const p of pages.splice(0)) await p.close();
  const page = await browser.newPage();
  pages.push(page);
  td.add(() => page.close());
  page.setDefaultTimeout(30_000);
  await page.goto(url);
  return page;
}

const row = (page: Page, taskId: string) => page.locator(`#tasks tr[data-task="${taskId}"]`);

describe('the dashboard in a browser', () => {
  it('shows a task appear and complete live, then its steps, attempts and events', async () => {
    const page = await open(`${operatorUrl}/#/tasks`);
    await expect.poll(() => page.locator('#identity').getAttribute('data-can-act')).toBe('true');
    triad.services.payment.setFaults({ latencyMs: 3_000 });
    const { taskId } = await triad.client.submit('orders', { orderId: 'dash-live', amount: 12 });
    await row(page, taskId).waitFor();
    // Seen before it ended, then ended — without reloading the page.
    expect(await row(page, taskId).getAttribute('data-status')).toBe('running');
    await page.locator(`#tasks tr[data-task="${taskId}"][data-status="completed"]`).waitFor({ timeout: 30_000 });
    triad.services.payment.setFaults({ latencyMs: 0 });
    for (let i = 0; i < 4; i++) await triad.client.run('orders', { orderId: `dash-more-${i}`, amount: 5 + i }, { timeoutMs: 30_000 });
    await page.screenshot({ path: join(IMAGES, 'dashboard-tasks.png') });

    await row(page, taskId).locator('a').click();
    await page.locator('#task-status', { hasText: 'completed' }).waitFor();
    for (const step of ['reserve', 'fraud', 'charge', 'ship']) {
      await page.locator(`svg.dag g.node.st-processed[data-step="${step}"]`).waitFor();
      expect(await page.locator(`#steps tr[data-step="${step}"]`).getAttribute('data-status')).toBe('processed');
    }
    await expect.poll(() => page.locator('#attempts tbody tr').count()).toBeGreaterThanOrEqual(4);
    await page.locator('#events li[data-type="completed"]').waitFor();
    expect(await page.locator('#events li[data-type="received"]').count()).toBe(1);
    await page.screenshot({ path: join(IMAGES, 'dashboard-task.png'), fullPage: true });
  });

  it('cancels a slow task from its page: the charge in flight finishes, then the task is undone', async () => {
    triad.services.payment.setFaults({ latencyMs: 3_000 });
    const { taskId } = await triad.client.submit('orders', { orderId: 'dash-cancel', amount: 30 });
    const page = await open(`${operatorUrl}/#/tasks/${taskId}`);
    await page.locator('#steps tr[data-step="charge"][data-status="processing"]').waitFor();
    // What each step waits for (decision 0021 §3.5): the charge in flight at the agent instance holding it
    // (the operator's dashboard probes), ship for the charge — in the steps table and under the DAG's steps.
    await expect.poll(() => page.locator('#steps tr[data-step="charge"] td.detail').textContent(), { timeout: 15_000 }).toMatch(/^in flight at agent-\S+ \(try 1, since \d\d:\d\d:\d\d\) until complete-by \d\d:\d\d:\d\d/);
    expect(await page.locator('#steps tr[data-step="ship"] td.detail').textContent()).toBe('waiting for charge');
    expect(await page.locator('svg.dag text[data-waiting="ship"]').textContent()).toContain('waiting for charge');
    expect(await page.locator('svg.dag text[data-waiting="charge"]').textContent()).toContain('in flight at agent-');
    await page.locator('#cancel').click();
    await page.locator('#task-status', { hasText: 'cancelled' }).waitFor({ timeout: 30_000 });
    triad.services.payment.setFaults({ latencyMs: 0 });
    expect((await triad.client.getTask(taskId)).status).toBe('cancelled');
    // Completed steps were compensated: their undo shows in the attempts.
    await page.locator('#attempts td', { hasText: 'undo' }).first().waitFor();
    await expect.poll(() => page.locator('#cancel').count()).toBe(0);
  });

  it('sends a signal to a waiting step from its page (decision 0019 §7): the task completes with the signal data', async () => {
    await triad.client.registerWorkflow({ name: 'dash-approval', steps: [{ name: 'approval', waitFor: { signal: 'approved', timeoutMs: 120_000 } }] });
    const { taskId } = await triad.client.submit('dash-approval', {});
    const page = await open(`${operatorUrl}/#/tasks/${taskId}`);
    await page.locator('#steps tr[data-step="approval"][data-status="waiting"]').waitFor();
    expect(await page.locator('#steps tr[data-step="approval"] td.detail').textContent()).toMatch(/^waiting for signal approved until \d\d:\d\d:\d\d/);
    await page.locator('#signal-form textarea[name="data"]').fill('{"approvedBy":"dashboard"}');
    await page.locator('#signal-form input[name="id"]').fill(`dash-sig-${taskId}`);
    await page.locator('#signal').click();
    await page.locator('.notice', { hasText: `signal approved delivered to approval (id dash-sig-${taskId})` }).waitFor();
    await page.locator('#task-status', { hasText: 'completed' }).waitFor({ timeout: 30_000 });
    expect((await triad.client.getTask(taskId)).steps[0]).toMatchObject({ status: 'processed', output: { approvedBy: 'dashboard' }, signalId: `dash-sig-${taskId}` });
    await expect.poll(() => page.locator('#signal-form').count()).toBe(0);
    // The server validates the request: a bad signal name is refused with the reason.
    const bad = await page.request.post(`${operatorUrl}/api/tasks/${taskId}/signal`, { data: { name: 'not a name!' } });
    expect(bad.status()).toBe(400);
  });

  it('links a child step to its child task and back (decision 0019 §7): the parent completes when its child does', async () => {
    await triad.client.registerWorkflow({ name: 'dash-inner', steps: [{ name: 'approval', waitFor: { signal: 'approved', timeoutMs: 120_000 } }] });
    await triad.client.registerWorkflow({ name: 'dash-outer', steps: [{ name: 'sub', child: { workflow: 'dash-inner' } }] });
    const { taskId } = await triad.client.submit('dash-outer', {});
    const childId = `${taskId}:sub:1`;
    const page = await open(`${operatorUrl}/#/tasks/${taskId}`);
    await page.locator('#steps tr[data-step="sub"][data-status="waiting"]').waitFor();
    expect(await page.locator('#steps tr[data-step="sub"] td.detail').textContent()).toBe(`waiting for child task ${childId} (dash-inner) open`);
    await page.locator('#steps tr[data-step="sub"] a.child-link').click();
    await page.locator('#parent-link', { hasText: taskId }).waitFor();
    await page.locator('#steps tr[data-step="approval"][data-status="waiting"]').waitFor();
    await triad.client.signal(childId, 'approved', { by: 'dashboard test' });
    await page.locator('#task-status', { hasText: 'completed' }).waitFor({ timeout: 30_000 });
    await page.locator('#parent-link').click();
    await page.locator('#task-status', { hasText: 'completed' }).waitFor({ timeout: 30_000 });
    expect(await page.locator('#steps tr[data-step="sub"] td.detail').textContent()).toBe(`child task ${childId} (dash-inner) completed open`);
    expect((await triad.client.getTask(taskId)).steps[0]?.output).toEqual({ approval: { by: 'dashboard test' } });
  });

  it('retries a failed step from the alerts page; the task then completes', async () => {
    triad.services.shipping.setFaults({ failRate: 1 });
    const { taskId } = await triad.client.submit('orders-strict', { orderId: 'dash-alert', amount: 8 });
    await waitFor(async () => (await triad.client.getTask(taskId)).status === 'failed' || undefined, { timeoutMs: 30_000, what: `task ${taskId} failed` });
    // A dead letter for the dead letters page (and its screenshot).
    await triad.client.bus.js.publish(triad.client.bus.names.subjects.submit('default'), new Uint8Array([0xc1, 0x00, 0x42]));

    const page = await open(`${operatorUrl}/#/alerts`);
    const alert = page.locator(`#alerts tr[data-task="${taskId}"][data-step="ship"]`);
    await alert.waitFor();
    await page.screenshot({ path: join(IMAGES, 'dashboard-alerts.png') });
    triad.services.shipping.setFaults({ failRate: 0 });
    await alert.locator('button.retry-alert').click();
    await page.locator('.notice, .problem').first().waitFor();
    expect(await page.locator('.problem').allTextContents()).toEqual([]);
    await page.locator('.notice', { hasText: 'retrying ship' }).waitFor();
    await waitFor(async () => (await triad.client.getTask(taskId)).status === 'completed' || undefined, { timeoutMs: 30_000, what: `retried task ${taskId} completed` });
    await alert.waitFor({ state: 'detached', timeout: 30_000 });

    await page.goto(`${operatorUrl}/#/dead-letters`);
    await page.locator('#dead-letters td', { hasText: 'not valid msgpack' }).first().waitFor();
    await page.screenshot({ path: join(IMAGES, 'dashboard-dead-letters.png') });
    await page.goto(`${operatorUrl}/#/workflows`);
    await page.locator('[data-workflow="orders"] svg.dag g.node[data-step="charge"]').waitFor();
    expect(await page.locator('[data-workflow="orders"] svg.dag .undo').count()).toBe(3);
    await page.screenshot({ path: join(IMAGES, 'dashboard-workflows.png'), fullPage: true });
    await page.goto(`${operatorUrl}/#/cluster`);
    await page.locator('#leader b', { hasNotText: 'none' }).waitFor();
    await page.locator('#agents td', { hasText: 'payment' }).waitFor();
    await page.screenshot({ path: join(IMAGES, 'dashboard-cluster.png'), fullPage: true });
  });

  it('replays a dead letter to its own source only after showing where it goes (decision 0022)', async () => {
    const { taskId } = await triad.client.submit('dash-later', { orderId: 'dash-replay', amount: 2 }, { taskId: `dash-replay-${Date.now()}` });
    const subject = triad.client.bus.names.subjects.submit(triad.client.clientId);
    const page = await open(`${operatorUrl}/#/dead-letters`);
    const row = page.locator('#dead-letters tr', { hasText: 'dash-replay' }).first();
    await row.waitFor();
    await row.locator('code', { hasText: subject }).first().waitFor();
    await triad.client.registerWorkflow({ ...ordersWorkflow.toJSON(), name: 'dash-later' });
    // Declined: nothing is published.
    page.once('dialog', (d) => void d.dismiss());
    await row.locator('button', { hasText: 'Replay' }).click();
    await expect(triad.client.getTask(taskId)).rejects.toMatchObject({ code: 'UNKNOWN_TASK' });
    // Accepted: the confirmation named the subject; the server publishes there and says where it stored it.
    let asked = '';
    page.once('dialog', (d) => {
      asked = d.message();
      void d.accept();
    });
    await row.locator('button', { hasText: 'Replay' }).click();
    await page.locator('.notice', { hasText: 'stored as' }).waitFor();
    expect(asked).toContain(`to ${subject} (stream ${triad.client.bus.names.streams.submit})`);
    await waitFor(async () => (await triad.client.getTask(taskId).catch(() => undefined))?.status === 'completed' || undefined, { timeoutMs: 30_000, what: `replayed task ${taskId} completed` });
    // The server publishes only to the subject the page showed.
    const seq = (await triad.client.deadLetters({ source: 'submit' })).find((d) => d.original.format === 'msgpack' && (d.original.value as { taskId?: string }).taskId === taskId)?.seq;
    const res = await fetch(`${operatorUrl}/api/dead-letters/${seq ?? 0}/replay`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ subject: triad.client.bus.names.subjects.command }) });
    expect(res.status).not.toBe(200);
    expect(await res.text()).toContain('nothing was published');
  });

  it('finds tasks by their tags from the search index (decision 0021 §1.7), filtered by status, and says what is wrong with a bad tag', async () => {
    const customer = `dash-c-${Date.now()}`;
    const mine = await Promise.all([0, 1].map((i) => triad.client.run('orders', { orderId: `dash-tag-${i}`, amount: 3 + i }, { tags: { customer }, timeoutMs: 30_000 })));
    await triad.client.run('orders', { orderId: 'dash-tag-other', amount: 2 }, { tags: { customer: `${customer}-other` }, timeoutMs: 30_000 });
    const page = await open(`${operatorUrl}/#/tasks`);
    await page.locator('#tag-search input[name="tags"]').fill(`customer=${customer}`);
    await page.locator('#tag-search button[type="submit"]').click();
    await page.locator('#tasks[data-source="search"]').waitFor();
    const listed = async (): Promise<string[]> => {
      const rows = page.locator('#tasks tbody tr');
      const ids: string[] = [];
      for (let i = 0; i < (await rows.count()); i++) ids.push((await rows.nth(i).getAttribute('data-task')) ?? '');
      return ids.sort();
    };
    await expect.poll(listed).toEqual(mine.map((t) => t.taskId).sort());
    // Status as selected: none of them failed.
    await page.locator('select[name="status"]').selectOption('failed');
    await page.locator('#tag-search button[type="submit"]').click();
    await expect.poll(() => page.locator('#tasks tbody tr').count()).toBe(0);
    await page.locator('#tag-search input[name="tags"]').fill('customer');
    await page.locator('#tag-search button[type="submit"]').click();
    expect(await page.locator('#tag-problem').textContent()).toContain('"customer" is not key=value');
    await page.locator('#clear-search').click();
    await page.locator('#tasks[data-source="live"]').waitFor();
  });

  it('lists the schedules and pauses and resumes one from the schedules page (decision 0019 §6)', async () => {
    await triad.client.createSchedule('dash-hourly', { workflow: 'orders', every: '1h', input: { orderId: 'hourly', amount: 1 } });
    const page = await open(`${operatorUrl}/#/schedules`);
    const row = page.locator('#schedules tr[data-schedule="dash-hourly"]');
    await row.waitFor();
    expect(await row.locator('td').nth(2).textContent()).toBe('every 1h');
    expect(await row.locator('td.state').textContent()).toBe('active');
    await page.screenshot({ path: join(IMAGES, 'dashboard-schedules.png') });
    await row.locator('button.toggle-schedule').click();
    await page.locator('#schedules tr[data-schedule="dash-hourly"][data-paused="true"]').waitFor();
    expect((await triad.client.getSchedule('dash-hourly')).paused).toBe(true);
    await page.locator('.notice', { hasText: 'schedule dash-hourly paused' }).waitFor();
    await row.locator('button.toggle-schedule', { hasText: 'Resume' }).click();
    await page.locator('#schedules tr[data-schedule="dash-hourly"][data-paused="false"]').waitFor();
    expect((await triad.client.getSchedule('dash-hourly')).paused).toBe(false);
    await triad.client.deleteSchedule('dash-hourly');
  });

  it("shows the dispatch limits (decision 0020 §6): the limits table live, an agent type's keys on a click, a queued step's place in its DAG box and detail", async () => {
    triad.services.payment.setFaults({ latencyMs: 4_000 });
    await triad.client.setAgentLimit('payment', { concurrency: 1, key: 'input.customerId' });
    try {
      const page = await open(`${operatorUrl}/#/limits`);
      await page.locator('#limits tr[data-agent="payment"]').waitFor();
      await new Promise((r) => setTimeout(r, 1_300)); // every scheduler applies a limit within 1 s
      const ids: string[] = [];
      for (const [i, customerId] of ['A', 'A', 'A', 'B'].entries()) ids.push((await triad.client.submit('orders', { orderId: `dash-lim-${i}`, amount: 7, customerId })).taskId);
      // Refreshed like the task list: the charges in line show up without a reload.
      await expect.poll(async () => Number(await page.locator('#limits tr[data-agent="payment"]').getAttribute('data-waiting')), { timeout: 30_000 }).toBeGreaterThanOrEqual(2);
      expect(await page.locator('#limits tr[data-agent="payment"] td').first().textContent()).toBe('payment');
      await page.locator('#limits tr[data-agent="payment"]').click();
      await page.locator('#limit-keys tr[data-key="A"]').waitFor();
      expect(Number(await page.locator('#limit-keys tr[data-key="A"]').getAttribute('data-waiting'))).toBeGreaterThanOrEqual(1);
      await page.screenshot({ path: join(IMAGES, 'dashboard-limits.png') });

      // A task whose charge waits: its DAG box says queued and its place, its detail the limit and the place.
      let queued: string | undefined;
      await waitFor(
        async () => {
          for (const id of ids) if ((await triad.client.getTask(id)).steps.find((x) => x.name === 'charge')?.status === 'queued') return (queued = id);
          return undefined;
        },
        { timeoutMs: 30_000, what: 'a charge waiting for the limit of payment' },
      );
      const task = await open(`${operatorUrl}/#/tasks/${queued}`);
      await task.locator('svg.dag g.node.st-queued[data-step="charge"]').waitFor();
      expect(await task.locator('svg.dag text[data-status-line="charge"]').textContent()).toMatch(/^queued · place \d+$/);
      expect(await task.locator('#steps tr[data-step="charge"] td.detail').textContent()).toMatch(/^waits for a limit of payment: place \d+ \(key [AB], priority 3, [\d.]+m?s so far\)$/);

      // The keys of an agent type with no limit: a 404 that says where to look.
      const none = await task.request.get(`${operatorUrl}/api/limits/nolimit/keys`);
      expect(none.status()).toBe(404);
      // A read-only identity is told the limits are an operator's (agentLimit.list holds other tenants' keys).
      const viewerPage = await open(`${viewerUrl}/#/limits`);
      await viewerPage.locator('#limits-why', { hasText: "operator's to read" }).waitFor();
      expect(await viewerPage.locator('#limits tbody tr').count()).toBe(0);
      triad.services.payment.setFaults({ latencyMs: 0 });
      for (const id of ids) expect((await triad.client.wait(id, { timeoutMs: 60_000 })).status).toBe('completed');
    } finally {
      triad.services.payment.setFaults({ latencyMs: 0 });
      await triad.client.clearAgentLimit('payment');
    }
  });

  it("a client-role identity sees its own tasks only, no action buttons, and its server refuses actions", async () => {
    triad.services.payment.setFaults({ latencyMs: 3_000 });
    const viewer = await TriadClient.connect(clientOptionsFromEnv({ ...triad.env, NATS_USER: 'viewer', NATS_PASSWORD: 'viewer-secret', TRIAD_CLIENT_ID: 'viewer' }));
    td.add(() => viewer.close());
    const { taskId: othersTaskId } = await triad.client.submit('orders', { orderId: 'dash-others', amount: 3 });
    const { taskId } = await viewer.submit('orders', { orderId: 'dash-viewer', amount: 4 });
    const page = await open(`${viewerUrl}/#/tasks`);
    await expect.poll(() => page.locator('#identity').getAttribute('data-can-act')).toBe('false');
    await row(page, taskId).waitFor();
    // The same list holds no other client's task (decision 0017), and the page says whose tasks it reads.
    expect(await row(page, othersTaskId).count()).toBe(0);
    await expect.poll(() => page.locator('#identity').textContent(), { timeout: 10_000 }).toContain('own tasks');
    await row(page, taskId).locator('a').click();
    await page.locator('#steps tr[data-step="charge"]').waitFor();
    expect(await page.locator('#task-status').textContent()).not.toMatch(/completed|cancelled/);
    expect(await page.locator('#cancel').count()).toBe(0);
    expect(await page.locator('#retry-form').count()).toBe(0);
    await page.goto(`${viewerUrl}/#/alerts`);
    await page.locator('text=Alerts are the operator').waitFor();
    expect(await page.locator('button').count()).toBe(0);
    const refused = await page.request.post(`${viewerUrl}/api/tasks/${taskId}/cancel`, { data: {} });
    expect(refused.status()).toBe(403);
    expect(((await refused.json()) as { error: { message: string } }).error.message).toContain('operator role');
    triad.services.payment.setFaults({ latencyMs: 0 });
    await waitFor(async () => (await triad.client.getTask(taskId)).status === 'completed' || undefined, { timeoutMs: 30_000, what: `task ${taskId} completed, not cancelled` });
    await waitFor(async () => (await triad.client.getTask(othersTaskId)).status === 'completed' || undefined, { timeoutMs: 30_000, what: `task ${othersTaskId} completed` });
  });

  it('--http-port serves the dashboard process\'s own /metrics, /healthz and /readyz', async () => {
    expect(operatorHealthUrl, 'the "metrics and health at" line').toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    const metrics = await fetch(`${operatorHealthUrl}/metrics`);
    expect(metrics.status).toBe(200);
    expect(await metrics.text()).toMatch(/^triad_process_cpu_seconds_total\{namespace="[^"]+"\} /m);
    expect((await fetch(`${operatorHealthUrl}/healthz`)).status).toBe(200);
    const ready = await fetch(`${operatorHealthUrl}/readyz`);
    expect(ready.status).toBe(200);
    expect(await ready.json()).toMatchObject({ ready: true, checks: { nats: true } });
  });

  it('refuses a request whose Host is another name (DNS rebinding): 403 with the reason', async () => {
    const { hostname, port } = new URL(operatorUrl);
    const answer = await new Promise<{ status: number; body: string }>((resolve, reject) => {
      const req = httpRequest({ host: hostname, port, path: '/api/identity', headers: { host: `rebound.example:${port}` } }, (res) => {
        let body = '';
        res.on('data', (c: Buffer) => (body += c.toString()));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      });
      req.on('error', reject);
      req.end();
    });
    expect(answer.status).toBe(403);
    expect(answer.body).toContain('open it by that address');
  });
});
