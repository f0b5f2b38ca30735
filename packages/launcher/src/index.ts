/**
 * @triad/launcher — what npm start (apps/local), the bench (apps/bench) and the test harness share to
 * start their own servers: the nats-server / redis-server / redis-cli binaries (with install hints when
 * missing), free loopback ports, and whether something already listens.
 */
export { findBinary, requireBinary, type BinaryPurpose, type ServerBinary } from './binaries.js';
export { freePort, freePorts, listening, waitListening, type WaitListeningOptions } from './ports.js';
