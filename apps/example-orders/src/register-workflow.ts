/**
 * Registers a workflow through a scheduler's API (over NATS, with the client SDK) in the background:
 * retried until a scheduler answers, so the agent host serves steps meanwhile and nobody has to run
 * `triad workflows register` before the first submission.
 */
import { TriadClient } from '@triad/client';
import { ErrorCode, errorMessage, isTriadError, type WorkflowDefinitionInput } from '@triad/protocol';
import { type Logger } from '@triad/telemetry';

export interface BackgroundRegistrationOptions {
  natsUrl: string;
  namespace: string;
  definition: WorkflowDefinitionInput;
  log: Logger;
  /** First pause between tries; it doubles up to `maxDelayMs`. */
  initialDelayMs?: number;
  maxDelayMs?: number;
  /** While it keeps failing, the warning is repeated this often (the first failure is always logged). */
  warnEveryMs?: number;
}

export type RegistrationState =
  | { state: 'pending' }
  | { state: 'registered'; version: number; created: boolean }
  /** The scheduler answered that the definition itself is wrong: trying again cannot help. */
  | { state: 'refused'; reason: string };

export interface BackgroundRegistration {
  current(): RegistrationState;
  /** Resolves once the registration is registered or refused (never rejects). */
  readonly settled: Promise<RegistrationState>;
  /** Stops trying and closes the connection. */
  stop(): Promise<void>;
}

const STOP_WAIT_MS = 2_000;

/** Answers that say the definition (or the request) is wrong, not that no scheduler could take it. */
const PERMANENT: readonly string[] = [ErrorCode.InvalidDefinition, ErrorCode.InvalidMessage, ErrorCode.PayloadTooLarge, ErrorCode.VersionConflict];

/**
 * Starts registering `definition` without a version, so the scheduler's registerWorkflow script stores
 * a new version only when the document differs from the latest one: restarts, and several agent hosts
 * starting at once, leave exactly one version of an unchanged definition.
 */
export function registerInBackground(o: BackgroundRegistrationOptions): BackgroundRegistration {
  const name = o.definition.name;
  const initialDelayMs = o.initialDelayMs ?? 250;
  const maxDelayMs = o.maxDelayMs ?? 5_000;
  const warnEveryMs = o.warnEveryMs ?? 30_000;
  let state: RegistrationState = { state: 'pending' };
  let stopped = false;
  let client: TriadClient | undefined;
  let wake: (() => void) | undefined;

  const pause = (ms: number): Promise<void> =>
    new Promise((resolve) => {
      const timer = setTimeout(resolve, ms);
      wake = () => {
        clearTimeout(timer);
        resolve();
      };
    });

  const run = async (): Promise<RegistrationState> => {
    // A connection of its own: the agent's bus stays as it is, and this one closes once registered.
    client = await TriadClient.connect({ natsUrl: o.natsUrl, namespace: o.namespace, name: `triad-register-${name}-${process.pid}`, waitForServer: true });
    let attempts = 0;
    let lastWarnAt = -Infinity;
    for (let delay = initialDelayMs; !stopped; delay = Math.min(delay * 2, maxDelayMs)) {
      attempts++;
      try {
        const r = await client.registerWorkflow(o.definition);
        o.log.info(
          { workflow: name, version: r.version, created: r.created, attempts, warnings: r.warnings },
          r.created ? `workflow ${name} v${r.version} registered` : `workflow ${name} v${r.version} already registered (unchanged)`,
        );
        return { state: 'registered', version: r.version, created: r.created };
      } catch (e) {
        if (isTriadError(e) && PERMANENT.includes(e.code)) {
          const reason = errorMessage(e);
          o.log.error({ workflow: name, err: reason, details: e.details }, `workflow ${name} was refused by the scheduler: ${reason}; fix the definition and restart this process`);
          return { state: 'refused', reason };
        }
        if (Date.now() - lastWarnAt >= warnEveryMs) {
          lastWarnAt = Date.now();
          o.log.warn(
            { workflow: name, attempts, err: errorMessage(e) },
            `workflow ${name} not registered yet (${errorMessage(e)}); retrying in the background, steps are served meanwhile`,
          );
        }
      }
      await pause(delay);
    }
    return state;
  };

  const settled = run()
    .catch((e: unknown): RegistrationState => {
      // Only the connection can throw here (every answer is handled above): keep the reason visible.
      const reason = errorMessage(e);
      o.log.error({ workflow: name, err: reason }, `workflow ${name} cannot be registered: ${reason}`);
      return { state: 'refused', reason };
    })
    .then(async (final) => {
      state = final;
      const c = client;
      client = undefined;
      await c?.close().catch(() => undefined);
      return final;
    });

  return {
    current: () => state,
    settled,
    stop: async () => {
      stopped = true;
      wake?.();
      // Closing fails a request in flight at once; a first connect still waiting for NATS is not waited for.
      await client?.close().catch(() => undefined);
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([settled, new Promise((resolve) => (timer = setTimeout(resolve, STOP_WAIT_MS)))]);
      clearTimeout(timer);
    },
  };
}
