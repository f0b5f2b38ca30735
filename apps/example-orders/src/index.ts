/** @triad/example-orders — the pattern's example: the orders workflow, its agents and the stand-in services. */
export { ordersWorkflow } from './workflow.js';
export { orderAgents, serviceUrlsFromEnv, SERVICE_ENDPOINTS, OrderInputSchema, MAX_ORDER_LINES, type OrderInput, type ServiceUrls, type ServiceEndpointEnv } from './order-agents.js';
export { registerInBackground, type BackgroundRegistration, type BackgroundRegistrationOptions, type RegistrationState } from './register-workflow.js';
export { startRemoteService, faultsFromEnv, startExampleServices, envPrefix, EXAMPLE_SERVICES, WHOLE_ORDER_LINE, type RemoteService, type Faults, type Effect } from './services/index.js';

