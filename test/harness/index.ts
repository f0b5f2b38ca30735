// The integration-test harness: real nats-server and redis-server on free ports, actor processes, fault injection.
//
// Usage (vitest):
//
//   import { afterAll, beforeAll, it } from 'vitest';
//   import { startNats, startRedis, startProcess, uniqueNamespace, waitFor, withTeardown } from '../harness/index.js';
//   import type { NatsServer, RedisServer } from '../harness/index.js';
//
//   const td = withTeardown(afterAll);               // = new Teardown() + afterAll(() => td.run())
//   let nats: NatsServer, redis: RedisServer;
//   beforeAll(async () => {
//     // Each start registers its server in td before waiting for readiness: a failing setup still cleans up.
//     [nats, redis] = await Promise.all([startNats({ teardown: td }), startRedis({ teardown: td })]);
//   });
//
//   it('survives a NATS crash', async () => {
//     const ns = uniqueNamespace('crash');            // subject/key/stream prefix no other test shares
//     const agent = await startProcess({ name: 'agent', args: ['apps/agent/dist/main.js'], teardown: td,
//       env: { NATS_URL: nats.url, REDIS_URL: redis.url, TRIAD_NAMESPACE: ns }, readyPattern: /ready/ });
//     await nats.kill();
//     await nats.restart();                           // same URL, same JetStream store
//     await waitFor(() => agent.output().includes('reconnected'), { timeoutMs: 20_000, what: 'agent to reconnect' });
//   });
//
// Every child the harness spawns is also SIGKILLed, and every server dir removed, when the worker ends,
// however it ends: exit, uncaught error, SIGTERM from vitest, or SIGKILL (see children.ts in @triad/launcher).

export { findBinary, listening, natsServerArgs, redisServerArgs, requireBinary, type ServerBinary } from '@triad/launcher';
export { HarnessTimeoutError, RedisReplyError } from './errors.js';
export { natsInfo, natsRequest, type NatsProtocolOptions, type NatsServerInfo } from './nats-protocol.js';
export { startNats, type NatsServer, type StartNatsOptions } from './nats.js';
export { uniqueNamespace } from './namespace.js';
export { makeTestPki, type TestPki } from './pki.js';
export { freePort, freePorts } from '@triad/launcher';
export { startProcess, type StartedProcess as ActorProcess, type StartProcessOptions } from '@triad/launcher';
export { startRedis, type RedisServer, type StartRedisOptions } from './redis.js';
export { startNatsCluster, startRedisCluster, type NatsCluster, type RedisCluster } from './clusters.js';
export { redisCommand, redisCommandWith, redisReply, type RedisCommandOptions, type RespValue } from './resp.js';
export { Teardown, withTeardown, type TeardownStep } from './teardown.js';
export type { ServerControl } from './server.js';
export { sleep, waitFor, type WaitForOptions } from './wait.js';
