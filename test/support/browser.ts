// A real browser for the dashboard's test: Debian's chromium (installed with apt-get when missing),
// driven by playwright-core, headless, in a fresh profile that the teardown removes.
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type BrowserContext } from 'playwright-core';
import type { Teardown } from '../harness/index.js';

export const CHROMIUM = '/usr/bin/chromium';

/** Installs Debian's chromium when it is missing (as root; the CI image is Debian), or fails saying how. */
export function ensureChromium(): string {
  if (existsSync(CHROMIUM)) return CHROMIUM;
  const apt = spawnSync('apt-get', ['install', '-y', 'chromium'], { stdio: 'pipe', timeout: 15 * 60_000, env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' } });
  if (apt.status !== 0 || !existsSync(CHROMIUM)) {
    const out = `${apt.stdout?.toString() ?? ''}${apt.stderr?.toString() ?? ''}`.slice(-2_000);
    throw new Error(`chromium is not installed at ${CHROMIUM} and "apt-get install -y chromium" failed (${apt.error?.message ?? `exit ${apt.status}`}): install it as root and run the tests again.\n${out}`);
  }
  return CHROMIUM;
}

/** A headless chromium context with a fresh profile; closed and removed by the teardown. */
export async function launchBrowser(td: Teardown): Promise<BrowserContext> {
  const executablePath = ensureChromium();
  const profile = await mkdtemp(join(tmpdir(), 'triad-chromium-'));
  td.add(() => rm(profile, { recursive: true, force: true }));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath,
    headless: true,
    viewport: { width: 1360, height: 900 },
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    timeout: 60_000,
  });
  td.add(() => context.close());
  return context;
}
