// Errors the harness raises, named so a test can tell "the system was too slow" from "the system broke".

/**
 * A bounded wait ran out: a readiness probe, a reply, a line of output or a `waitFor` condition. The
 * launcher's WaitTimeoutError under the harness' name, so the waits of startProcess (which lives in
 * @triad/launcher) and the harness' own are one class.
 */
export { WaitTimeoutError as HarnessTimeoutError, messageOf } from '@triad/launcher';

/** A Redis error reply (`-ERR …`, `-LOADING …`), kept apart from transport failures. */
export class RedisReplyError extends Error {
  override readonly name = 'RedisReplyError';

  constructor(readonly reply: string) {
    super(`redis replied with an error: ${reply}`);
  }
}
