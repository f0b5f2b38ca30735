/** Public surface of the order example's stand-in remote services (inventory, payment, shipping). */
export { startRemoteService, faultsFromEnv, envPrefix, MAX_BODY_BYTES, NO_FAULTS, WHOLE_ORDER_LINE } from './remote-service.js';
export type { Effect, Faults, RemoteService, RemoteServiceOptions, ServiceName } from './remote-service.js';
export { startExampleServices, describeService, EXAMPLE_SERVICES } from './main.js';
