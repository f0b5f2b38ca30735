/**
 * The pattern's own example: order processing. Reserve inventory and check for fraud in parallel; an
 * order above 1000 then waits for a person's `approved` signal (decision 0019: a conditional wait, no
 * agent takes part; a small order skips it); charge the payment (a flaky remote service), then ship each
 * line the inventory reserved (a fan-out over `reserve.items`: one shipping call per line, up to five at
 * once, each with its own idempotency key and cancellation; an order that lists no items is reserved and
 * shipped as a whole, one line; at most ten lines — MAX_ORDER_LINES, which the agents' input schema
 * enforces before anything is reserved). If the order cannot be completed, or its approval does not come within
 * two minutes, every step that may have taken effect is undone in reverse order: the shipments cancelled,
 * the charge refunded, the reservation released (the fraud screening has nothing to undo). Built with the typed builder; the
 * same document could be registered as JSON.
 */
import { workflow } from '@triad/core';

export const ordersWorkflow = workflow('orders')
  .description('Order processing: reserve inventory ∥ fraud check → approval above 1000 (signal approved) → charge payment → ship each reserved line; undone (cancel shipments, refund, release) on failure or without approval')
  .onFailure('compensate')
  .defaults({ retry: { maxAttempts: 3, initialDelayMs: 50, maxDelayMs: 1_000 }, ladder: { retries: 3, longBackoffMs: 5_000, maxFailures: 6 } })
  .step('reserve', { agent: 'inventory', budgetMs: 5_000, compensate: { agent: 'inventory', budgetMs: 5_000 } })
  .step('fraud', { agent: 'fraud', budgetMs: 5_000 })
  .waitFor('approval', { signal: 'approved', timeoutMs: 120_000 }, { dependsOn: ['reserve', 'fraud'], when: { input: 'amount', gt: 1000 } })
  .step('charge', { agent: 'payment', budgetMs: 5_000, dependsOn: ['approval'], needs: ['reserve', 'fraud'], compensate: { agent: 'payment', budgetMs: 5_000 } })
  .step('ship', { agent: 'shipping', budgetMs: 5_000, dependsOn: ['charge'], needs: ['reserve', 'charge'], forEach: { output: 'reserve.items' }, maxItems: 10, maxParallel: 5, compensate: { agent: 'shipping', budgetMs: 5_000 } });
