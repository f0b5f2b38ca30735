/**
 * @triad/launcher — what npm start (apps/local), the bench (apps/bench) and the test harness share to
 * start their own servers and processes: the nats-server / redis-server / redis-cli binaries (with
 * install hints when missing), free loopback ports, whether something already listens, and child
 * processes — spawned, their output kept and waited on, stopped gracefully or killed, and never left
 * behind however the parent ends — and nats-server and redis-server themselves: their command lines,
 * composed in one place (servers.ts) for every caller, and a plain start on free ports.
 */
export { findBinary, requireBinary, type BinaryPurpose, type ServerBinary } from './binaries.js';
export {
  describeExit,
  killAndWait,
  killChildrenOnSignals,
  releaseScratchDir,
  sendSignal,
  spawnTracked,
  terminate,
  terminateAll,
  trackScratchDir,
  type ExitStatus,
  type TrackedChild,
} from './children.js';
export { OutputTail } from './output.js';
export { canListen, freePort, freePorts, listening, waitListening, type WaitListeningOptions } from './ports.js';
export { startProcess, type StartedProcess, type StartProcessOptions } from './process.js';
export { natsServerArgs, redisServerArgs, startNatsServer, startRedisServer, type LaunchedNats, type LaunchedServer, type NatsServerArgs, type RedisServerArgs } from './servers.js';
export { messageOf, sleep, WaitTimeoutError, withTimeout } from './wait.js';
