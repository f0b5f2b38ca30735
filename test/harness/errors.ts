// Errors the harness raises, named so a test can tell "the system was too slow" from "the system broke".

/** A bounded wait ran out: a readiness probe, a reply, a line of output or a `waitFor` condition. */
export class HarnessTimeoutError extends Error {
  override readonly name = 'HarnessTimeoutError';

  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
  }
}

/** A Redis error reply (`-ERR …`, `-LOADING …`), kept apart from transport failures. */
export class RedisReplyError extends Error {
  override readonly name = 'RedisReplyError';

  constructor(readonly reply: string) {
    super(`redis replied with an error: ${reply}`);
  }
}

/** Message of any thrown value, for composing error texts without losing non-Error throws. */
export function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
