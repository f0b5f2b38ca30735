/** @triad/example-orders — the pattern's example: the orders workflow, its agents and the stand-in services. */
export { ordersWorkflow } from './workflow.js';
export { orderAgents, serviceUrlsFromEnv, OrderInputSchema, type OrderInput, type ServiceUrls } from './order-agents.js';
export { startRemoteService, faultsFromEnv, startExampleServices, type RemoteService, type Faults, type Effect } from './services/index.js';

