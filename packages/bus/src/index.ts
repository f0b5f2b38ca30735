/**
 * @triad/bus — everything that touches NATS: the connection, the streams and durable consumers
 * (created idempotently), the consumer loop with dead-lettering, and publishing.
 */
export { connectBus, explainNoJetStream, isJetStreamNotEnabled, type Bus, type BusOptions } from './connection.js';
export { explainPermissionViolation } from './refusals.js';
/** Re-exported so a service sets its connection's inbox prefix with the bus it opens (decision 0016). */
export { serviceInboxPrefix } from '@triad/permissions';
export { loadNatsCredentials, type NatsCredentials } from './credentials.js';
export {
  ensureStreams,
  ensureConsumer,
  streamSpecs,
  streamReplicas,
  submitBacklogPerClient,
  DEFAULT_SUBMIT_BACKLOG_PER_CLIENT,
  type TopologyOptions,
  type ConsumerSpec,
} from './topology.js';
export { startConsumer, type Delivery, type Disposition, type ConsumeOptions, type RunningConsumer } from './consumer.js';
export {
  publishDurable,
  publishRetrying,
  isLeaderChange,
  isBacklogFull,
  PUBLISH_RETRY_MS,
  publishPlain,
  deadLetter,
  publishTaskEvents,
  sendTaskEvents,
  encodeTaskEvents,
  storeTaskEvents,
  type DeadLetterOrigin,
} from './publish.js';
export { protocolHeaders, unsupportedVersion, PROTOCOL_HEADER, REPLY_TO_HEADER, PROTOCOL_MAJOR } from './headers.js';
export { PayloadStore, readObject, offloadValue, offloadEncoded, resolveRefs, sha256Hex, mib, type PayloadStoreOptions } from './payloads.js';
