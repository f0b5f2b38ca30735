// The one composition of nats-server and redis-server command lines, and a plain start on free ports.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { listening, natsServerArgs, redisServerArgs, startNatsServer, startRedisServer } from '../src/index.js';

describe('server command lines', () => {
  it('nats-server: loopback, JetStream with its store, a configuration file first so the flags win', () => {
    expect(natsServerArgs({ port: 4000, storeDir: '/d' })).toEqual(['-a', '127.0.0.1', '-p', '4000', '-sd', '/d', '-js']);
    expect(natsServerArgs({ configFile: '/c.conf', host: '0.0.0.0', port: 4000, monitorPort: 8000, serverName: 'n1', storeDir: '/d', jetstream: false, extra: ['--routes', 'x'] })).toEqual([
      '-c', '/c.conf', '-a', '0.0.0.0', '-p', '4000', '-m', '8000', '--server_name', 'n1', '-sd', '/d', '--routes', 'x',
    ]);
  });

  it('redis-server: no snapshots, the append-only file as asked, TLS only on the port when given', () => {
    expect(redisServerArgs({ port: 6000, dir: '/r' })).toEqual(['--port', '6000', '--bind', '127.0.0.1', '--dir', '/r', '--save', '', '--appendonly', 'no', '--daemonize', 'no']);
    const tls = redisServerArgs({ port: 6000, dir: '/r', aof: 'always', password: 'pw', aclFile: '/a.acl', tls: { certFile: 'c', keyFile: 'k', caFile: 'ca' } });
    expect(tls.slice(0, 4)).toEqual(['--port', '0', '--tls-port', '6000']);
    expect(tls).toEqual(expect.arrayContaining(['--appendonly', 'yes', '--appendfsync', 'always', '--requirepass', 'pw', '--aclfile', '/a.acl']));
  });
});

describe('startNatsServer / startRedisServer', () => {
  it('start on free loopback ports, answer there, and stop', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'triad-launcher-test-'));
    try {
      const [nats, redis] = await Promise.all([startNatsServer({ storeDir: join(dir, 'nats'), monitor: true }), startRedisServer({ dir })]);
      expect(await listening('127.0.0.1', nats.port)).toBe(true);
      expect(await listening('127.0.0.1', redis.port)).toBe(true);
      expect(nats.monitorUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
      const varz = (await (await fetch(`${nats.monitorUrl}/varz`)).json()) as { jetstream?: unknown };
      expect(varz.jetstream).toBeDefined();
      await Promise.all([nats.stop(), redis.stop()]);
      expect(await listening('127.0.0.1', redis.port)).toBe(false);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
