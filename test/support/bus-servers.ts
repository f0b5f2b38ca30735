/**
 * A nats-server and a redis-server for the file, started in `beforeAll`, and buses connected to them the
 * way an actor connects (its settings from the environment it would read) — for tests that run a
 * scheduler, agent hosts and clients in the test's own process.
 */
import { beforeAll } from 'vitest';
import { connectBus, type Bus } from '@triad/bus';
import { loadConfig, type Config } from '@triad/settings';
import { startNats, startRedis, type NatsServer, type RedisServer, type Teardown } from '../harness/index.js';

export interface BusServers {
  /** The servers (set once `beforeAll` has run). */
  readonly nats: NatsServer;
  readonly redis: RedisServer;
  /** The settings an actor of `namespace` reads from its environment. */
  config(namespace: string): Config;
  /** A bus of `namespace` named `name`, closed at teardown. */
  connect(namespace: string, name: string): Promise<Bus>;
}

export function busServers(td: Teardown): BusServers {
  let servers: { nats: NatsServer; redis: RedisServer } | undefined;
  beforeAll(async () => {
    const [nats, redis] = await Promise.all([startNats({ teardown: td }), startRedis({ teardown: td })]);
    servers = { nats, redis };
  });
  const started = (): { nats: NatsServer; redis: RedisServer } => {
    if (!servers) throw new Error('busServers: the servers start in beforeAll; use them inside a test or a later hook');
    return servers;
  };
  const self: BusServers = {
    get nats() {
      return started().nats;
    },
    get redis() {
      return started().redis;
    },
    config: (namespace) => loadConfig({ NATS_URL: started().nats.url, REDIS_URL: started().redis.url, TRIAD_NAMESPACE: namespace }),
    async connect(namespace, name) {
      const bus = await connectBus({ ...self.config(namespace).nats, namespace, name });
      td.add(() => bus.close());
      return bus;
    },
  };
  return self;
}
