/**
 * The pattern's own example: order processing. Reserve inventory and check for fraud in parallel,
 * charge the payment (a flaky remote service) once both are done, then ship. If the order cannot be
 * completed, every step that may have taken effect is undone in reverse order: the shipment cancelled,
 * the charge refunded, the reservation released (the fraud screening has nothing to undo). Built with
 * the typed builder; the same document could be registered as JSON.
 */
import { workflow } from '@triad/core';

export const ordersWorkflow = workflow('orders')
  .description('Order processing: reserve inventory ∥ fraud check → charge payment → ship; undone (cancel shipment, refund, release) on failure')
  .onFailure('compensate')
  .defaults({ retry: { maxAttempts: 3, initialDelayMs: 50, maxDelayMs: 1_000 }, ladder: { retries: 3, longBackoffMs: 5_000, maxFailures: 6 } })
  .step('reserve', { agent: 'inventory', budgetMs: 5_000, compensate: { agent: 'inventory', budgetMs: 5_000 } })
  .step('fraud', { agent: 'fraud', budgetMs: 5_000 })
  .step('charge', { agent: 'payment', budgetMs: 5_000, dependsOn: ['reserve', 'fraud'], needs: ['reserve', 'fraud'], compensate: { agent: 'payment', budgetMs: 5_000 } })
  .step('ship', { agent: 'shipping', budgetMs: 5_000, dependsOn: ['charge'], needs: ['reserve', 'charge'], compensate: { agent: 'shipping', budgetMs: 5_000 } });
