// docker-compose.cluster.yml checked without a Docker engine (decision 0015): the actors point at every
// NATS node and every Redis Cluster node with settings Triad accepts, the NATS nodes route to each other
// as one JetStream cluster, the Redis nodes run in cluster mode with AOF, and the cluster is formed (3
// primaries with a replica each) before any actor starts.
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '@triad/settings';
import { ComposeFile } from '../support/compose.js';
import { ROOT } from '../support/triad.js';

const file = ComposeFile.read(join(ROOT, 'docker-compose.cluster.yml'), {});
const nats = file.serviceNames().filter((n) => /^nats-\d$/.test(n));
const redis = file.serviceNames().filter((n) => /^redis-\d$/.test(n));
const actors = file.builtServiceNames().filter((n) => n !== 'services');

/** The value after `flag` in a service's command. */
function flag(service: string, name: string): string | undefined {
  const argv = file.argv(service);
  const i = argv.indexOf(name);
  return i >= 0 ? argv[i + 1] : undefined;
}

describe('docker-compose.cluster.yml', () => {
  it('runs 3 NATS nodes and 6 Redis nodes', () => {
    expect(nats).toEqual(['nats-1', 'nats-2', 'nats-3']);
    expect(redis).toEqual(['redis-1', 'redis-2', 'redis-3', 'redis-4', 'redis-5', 'redis-6']);
  });

  it('points every Triad process at all of them, with replicated streams and WAIT 1, in settings Triad accepts', () => {
    expect(actors.sort()).toEqual(['agent', 'cli', 'scheduler', 'supervisor']);
    for (const a of actors) {
      const env = file.environment(a);
      expect(env['NATS_URL'], a).toBe(nats.map((n) => `nats://${n}:4222`).join(','));
      expect(env['TRIAD_REDIS_CLUSTER'], a).toBe(redis.map((n) => `${n}:6379`).join(','));
      expect(env['TRIAD_STREAM_REPLICAS'], a).toBe('3');
      expect(env['TRIAD_REDIS_WAIT_REPLICAS'], a).toBe('1');
      const config = loadConfig(Object.fromEntries(Object.entries(env).filter((e): e is [string, string] => e[1] !== undefined)));
      expect(config.redis.cluster).toBe(env['TRIAD_REDIS_CLUSTER']);
      expect(config.redisWaitReplicas).toBe(1);
      expect(Object.keys(file.dependsOn(a)), a).toEqual(expect.arrayContaining([...nats, 'redis-init']));
      expect(file.dependsOn(a)['redis-init'], a).toBe('service_completed_successfully');
    }
  });

  it('routes each NATS node to the other two, one cluster name, JetStream on its own volume', () => {
    for (const n of nats) {
      expect(file.argv(n)).toContain('-js');
      expect(flag(n, '--server_name')).toBe(n);
      expect(flag(n, '--cluster_name')).toBe('triad');
      expect(flag(n, '--cluster')).toBe('nats://0.0.0.0:6222');
      expect((flag(n, '--routes') ?? '').split(',').sort()).toEqual(nats.filter((o) => o !== n).map((o) => `nats://${o}:6222`));
      expect(file.volumes(n).map((v) => v.target)).toEqual(['/data']);
    }
  });

  it('runs the Redis nodes in cluster mode with AOF, announcing their service names, and forms the cluster with a replica per primary', () => {
    for (const n of redis) {
      expect(flag(n, '--cluster-enabled')).toBe('yes');
      expect(flag(n, '--appendonly')).toBe('yes');
      expect(flag(n, '--cluster-announce-hostname')).toBe(n);
      expect(flag(n, '--cluster-preferred-endpoint-type')).toBe('hostname');
    }
    const init = file.argv('redis-init').join(' ');
    expect(init).toContain(`redis-cli --cluster create ${redis.map((n) => `${n}:6379`).join(' ')} --cluster-replicas 1 --cluster-yes`);
    for (const n of redis) expect(file.dependsOn('redis-init')[n]).toBe('service_healthy');
  });
});
