// The script runner on a real redis-server: calls made in one turn of the event loop leave in one socket
// write (coalesceWrites in scripts.ts), each still gets its own reply, and calls in later turns are not held.
import type { Socket } from 'node:net';
import { describe, expect, it } from 'vitest';
import { loadScripts, runScript } from '../src/index.js';
import { resolveLazy } from '../src/scripts.js';
import { usePrivateRedis } from './redis-server.js';

const r = usePrivateRedis('triad-scripts-test');

/** Counts the socket's writes as libuv gets them: one `_write` per lone chunk, one `_writev` per corked run. */
function countWrites(socket: Socket): { single: number; vectored: number; restore(): void } {
  const s = socket as Socket & { _write: (...a: unknown[]) => void; _writev: (...a: unknown[]) => void };
  const counts = { single: 0, vectored: 0, restore: () => undefined as void };
  const write = s._write.bind(s);
  const writev = s._writev.bind(s);
  s._write = (...a: unknown[]) => {
    counts.single++;
    write(...a);
  };
  s._writev = (...a: unknown[]) => {
    counts.vectored++;
    writev(...a);
  };
  counts.restore = () => {
    s._write = write;
    s._writev = writev;
  };
  return counts;
}

describe('runScript', () => {
  it('sends the calls of one turn in one write, each with its own reply', async () => {
    const redis = r();
    const keys = Array.from({ length: 20 }, (_, i) => `test:scripts:${process.pid}:lease:${i}`);
    await Promise.all(keys.map((k, i) => redis.set(k, `token-${i}`)));
    // Loaded once first, so the measured calls are EVALSHA only (no NOSCRIPT retry in between).
    await runScript(redis, 'releaseLeases', ['test:scripts:none'], ['x']);

    const writes = countWrites(redis.stream);
    try {
      // Every other lease with its own token (released), the rest with a wrong one (kept).
      const replies = await Promise.all(keys.map((k, i) => runScript(redis, 'releaseLeases', [k], [i % 2 === 0 ? `token-${i}` : 'wrong'])));
      expect(replies).toEqual(keys.map((_, i) => (i % 2 === 0 ? 1 : 0)));
      expect({ single: writes.single, vectored: writes.vectored }).toEqual({ single: 0, vectored: 1 });
    } finally {
      writes.restore();
    }
    expect(await redis.exists(...keys)).toBe(10);
    expect(redis.stream.writableCorked).toBe(0);
  });

  it('sends a script\'s text once when many calls find it not loaded (the others wait and use EVALSHA)', async () => {
    const redis = r();
    const keys = Array.from({ length: 30 }, (_, i) => `test:scripts:${process.pid}:flushed:${i}`);
    await Promise.all(keys.map((k) => redis.set(k, 't')));
    await redis.script('FLUSH');
    await redis.config('RESETSTAT');
    const replies = await Promise.all(keys.map((k) => runScript(redis, 'releaseLeases', [k], ['t'])));
    expect(replies).toEqual(keys.map(() => 1));
    const stats = await redis.info('commandstats');
    const calls = (cmd: string): number => Number(new RegExp(`^cmdstat_${cmd}:calls=(\\d+)`, 'm').exec(stats)?.[1] ?? 0);
    expect(calls('eval')).toBe(1);
    expect(calls('evalsha')).toBe(30 + 29);
    expect(await redis.exists(...keys)).toBe(0);
  });

  it('does not hold a call made in a later turn', async () => {
    const redis = r();
    const key = `test:scripts:${process.pid}:later`;
    await redis.set(key, 't');
    await runScript(redis, 'releaseLeases', ['test:scripts:none'], ['x']);
    const writes = countWrites(redis.stream);
    try {
      expect(await runScript(redis, 'releaseLeases', [key], ['other'])).toBe(0);
      await new Promise((resolve) => setImmediate(resolve));
      expect(await runScript(redis, 'releaseLeases', [key], ['t'])).toBe(1);
      // One call per turn: each leaves in its own write, as soon as its turn ends.
      expect(writes.single + writes.vectored).toBe(2);
    } finally {
      writes.restore();
    }
  });
});

describe('lazy definitions (resolveLazy)', () => {
  const fragment = (rest: string): string =>
    ['local RARE, build_rare', 'local function rare()', '  if not RARE then RARE = build_rare() end', '  return RARE', 'end', 'build_rare = function()', '--@lazy-begin', 'local function twice(x) return 2 * x end', 'local LIMIT, OTHER = 10, 20', '--@lazy-end', 'end', '--@lazy-imports rare', rest].join('\n');

  it('returns every top-level local of the region and imports only those the rest names bare', () => {
    const lua = resolveLazy(fragment('return twice(LIMIT) -- OTHER in a comment is no use'));
    expect(lua).toContain('return { twice = twice, LIMIT = LIMIT, OTHER = OTHER }');
    expect(lua).toContain('local twice = rare().twice\nlocal LIMIT = rare().LIMIT\nreturn twice(LIMIT)');
    expect(lua).not.toContain('local OTHER');
    expect(resolveLazy(fragment('return rare().twice(1)'))).not.toMatch(/^local \w+ = rare\(\)/m);
  });

  it('refuses a lazy name used before the imports, and rare().<name> of no lazy local', () => {
    expect(() => resolveLazy(fragment('').replace('local RARE, build_rare', 'local y = twice(1)\nlocal RARE, build_rare'))).toThrow(/twice: lazily defined/);
    expect(() => resolveLazy(fragment('return rare().thrice(1)'))).toThrow(/rare\(\)\.thrice: no top-level local/);
  });

  it("keeps the plain path's scripts from building the rare functions: createTask and applyResult import none", async () => {
    const scripts = loadScripts();
    for (const name of ['createTask', 'applyResult'] as const) expect(scripts.get(name)!.lua).not.toMatch(/^local \w+ = rare\(\)\./m);
    // Every script compiles (Lua's limits: 200 locals, 60 upvalues per function).
    for (const s of scripts.values()) expect(await r().script('LOAD', s.lua)).toBe(s.sha);
  });
});
