// Collects clean-up steps as resources appear and runs every one of them, even when some fail.
import { messageOf } from './errors.js';

export type TeardownStep = () => Promise<void> | void;

/**
 * A stack of clean-up steps. Register a resource the moment it exists (the harness does so right after
 * spawning, before readiness), so a setup that fails half-way still releases what it had started.
 */
export class Teardown {
  #steps: TeardownStep[] = [];

  add(step: TeardownStep): void {
    this.#steps.push(step);
  }

  /**
   * Runs the steps registered so far, last first, and empties the stack. A failing step never stops
   * the others; failures are thrown together afterwards as one AggregateError.
   */
  async run(): Promise<void> {
    const steps = this.#steps.reverse();
    this.#steps = [];
    const errors: unknown[] = [];
    for (const step of steps) {
      try {
        await step();
      } catch (error) {
        errors.push(error);
      }
    }
    if (errors.length > 0) {
      throw new AggregateError(
        errors,
        `teardown: ${errors.length} of ${steps.length} step(s) failed: ${errors.map(messageOf).join('; ')}`,
      );
    }
  }
}

/**
 * A Teardown already hooked to the runner, e.g. in vitest:
 *
 *   const td = withTeardown(afterAll);                       // same as: new Teardown() + afterAll(() => td.run())
 *   beforeAll(async () => { nats = await startNats({ teardown: td }); });
 *
 * The hook is passed in, rather than imported from vitest, so the harness stays runner-agnostic
 * and `afterEach` works just as well.
 */
export function withTeardown(hook: (fn: () => Promise<void>) => void): Teardown {
  const teardown = new Teardown();
  hook(() => teardown.run());
  return teardown;
}
