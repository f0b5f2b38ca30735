/**
 * The pattern's own example: order processing. Reserve inventory, charge the payment (a flaky remote
 * service), ship. Built with the typed builder; the same document could be registered as JSON.
 */
import { workflow } from '@triad/core';

export const ordersWorkflow = workflow('orders')
  .description('Order processing: reserve inventory, charge payment, ship')
  .defaults({ retry: { maxAttempts: 3, initialDelayMs: 50, maxDelayMs: 1_000 }, ladder: { retries: 3, longBackoffMs: 5_000, maxFailures: 6 } })
  .step('reserve', { agent: 'inventory', budgetMs: 5_000 })
  .step('charge', { agent: 'payment', budgetMs: 5_000, dependsOn: ['reserve'], needs: ['reserve'] })
  .step('ship', { agent: 'shipping', budgetMs: 5_000, dependsOn: ['charge'], needs: ['reserve', 'charge'] });

export const OrderInputSchemaDoc = '{ "orderId": string, "amount": number >= 0, "items"?: [{ "sku": string, "qty": number }] }';
