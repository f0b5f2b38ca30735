/** Typed errors: one class, one stable code per failure kind, a message that says what to do. */

export const ErrorCode = {
  InvalidMessage: 'INVALID_MESSAGE',
  PayloadTooLarge: 'PAYLOAD_TOO_LARGE',
  InvalidDefinition: 'INVALID_DEFINITION',
  UnknownWorkflow: 'UNKNOWN_WORKFLOW',
  UnknownTask: 'UNKNOWN_TASK',
  UnknownStep: 'UNKNOWN_STEP',
  UnknownSchedule: 'UNKNOWN_SCHEDULE',
  VersionConflict: 'VERSION_CONFLICT',
  Stale: 'STALE',
  InvalidState: 'INVALID_STATE',
  InvalidConfig: 'INVALID_CONFIG',
  Timeout: 'TIMEOUT',
  Unavailable: 'UNAVAILABLE',
  Internal: 'INTERNAL',
} as const;
export type ErrorCode = (typeof ErrorCode)[keyof typeof ErrorCode];

export class TriadError extends Error {
  override name = 'TriadError';
  readonly code: ErrorCode;
  /** Extra machine-readable facts (e.g. the list of problems of an invalid definition). */
  readonly details: readonly string[];

  constructor(code: ErrorCode, message: string, options: { cause?: unknown; details?: readonly string[] } = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.code = code;
    this.details = options.details ?? [];
  }

  /** The wire form, sent back to callers in API replies and carried in dead letters. */
  toWire(): WireError {
    return { code: this.code, message: this.message, details: [...this.details] };
  }

  static fromWire(w: WireError): TriadError {
    const code = (Object.values(ErrorCode) as string[]).includes(w.code) ? (w.code as ErrorCode) : ErrorCode.Internal;
    return new TriadError(code, w.message, { details: w.details ?? [] });
  }
}

export interface WireError {
  code: string;
  message: string;
  details?: string[];
}

export function isTriadError(e: unknown, code?: ErrorCode): e is TriadError {
  return e instanceof TriadError && (code === undefined || e.code === code);
}

/** Normalises anything thrown into a message string (for logs and wire errors). */
export function errorMessage(e: unknown): string {
  if (e instanceof Error) return e.message;
  if (typeof e === 'string') return e;
  try {
    return JSON.stringify(e);
  } catch {
    return String(e);
  }
}
