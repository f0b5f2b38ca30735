/** The integer codes Lua scripts return, and the one mapper that turns them into typed errors. */
import { ErrorCode, TriadError } from '@triad/protocol';

export const ScriptCode = {
  Ok: 0,
  Exists: 1,
  UnknownTask: 2,
  Stale: 3,
  InvalidState: 4,
  VersionConflict: 5,
  UnknownStep: 6,
  StaleEpoch: 7,
  /** Another instance holds the lease the transition would take: nothing was written. */
  LeaseBusy: 8,
  /** A result from an agent type the step's plan does not name for that phase (decision 0010). */
  Forged: 9,
  /** A task already holds as many buffered signals as it may (decision 0019 §3.3): nothing was written. */
  BufferFull: 10,
  /** No schedule of that name (decision 0019 §6.2). */
  UnknownSchedule: 11,
  /** A bulk operation already acted on this task (decision 0021 §2.3): nothing was written. */
  AlreadyApplied: 12,
  /** startQueued: the grant came too late to start the attempt before its complete-by (decision 0020 Q10). */
  Late: 13,
} as const;
export type ScriptCode = (typeof ScriptCode)[keyof typeof ScriptCode];

/** A transition refused because another instance holds the lease it would take: it wrote nothing. */
export class LeaseBusyError extends TriadError {
  override name = 'LeaseBusyError';
}

export function isLeaseBusy(e: unknown): e is LeaseBusyError {
  return e instanceof LeaseBusyError;
}

/** A bulk operation's act refused because that operation already acted on the task (decision 0021 §2.3). */
export class AlreadyAppliedError extends TriadError {
  override name = 'AlreadyAppliedError';
}

export function isAlreadyApplied(e: unknown): e is AlreadyAppliedError {
  return e instanceof AlreadyAppliedError;
}

export function scriptError(code: number, context: string, reason?: string): TriadError {
  const why = reason ? `: ${reason}` : '';
  switch (code) {
    case ScriptCode.UnknownTask:
      return new TriadError(ErrorCode.UnknownTask, `${context}: no such task${why}; check the task id (finished tasks are removed after their retention time)`);
    case ScriptCode.UnknownStep:
      return new TriadError(ErrorCode.UnknownStep, `${context}: no such step in the task's workflow${why}`);
    case ScriptCode.Stale:
      return new TriadError(ErrorCode.Stale, `${context}: rejected as stale${why}`);
    case ScriptCode.StaleEpoch:
      return new TriadError(ErrorCode.Stale, `${context}: rejected, a newer fencing epoch exists${why}`);
    case ScriptCode.LeaseBusy:
      return new LeaseBusyError(ErrorCode.Unavailable, `${context}: another instance holds the lease on this task or step at the moment${why}; nothing was written, try again shortly`);
    case ScriptCode.AlreadyApplied:
      return new AlreadyAppliedError(ErrorCode.InvalidState, `${context}${why}`);
    case ScriptCode.BufferFull:
      return new TriadError(ErrorCode.Unavailable, `${context}${why}`);
    case ScriptCode.InvalidState:
      return new TriadError(ErrorCode.InvalidState, `${context}: not allowed in the current state${why}`);
    case ScriptCode.VersionConflict:
      return new TriadError(ErrorCode.VersionConflict, `${context}: that version is already registered with a different definition${why}; register without a version to get the next one`);
    default:
      return new TriadError(ErrorCode.Internal, `${context}: unexpected script code ${code}${why}`);
  }
}
