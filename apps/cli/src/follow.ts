/**
 * Following a task until it ends (`submit --wait`, `watch`): its events as they happen, a time limit,
 * Ctrl-C, and the final state. Shared so both commands print and exit the same way.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { TriadClient } from '@triad/client';
import { TriadError, isTriadError, ErrorCode, type TaskEvent, type TaskState } from '@triad/protocol';
import { isTerminal } from '@triad/protocol/constants';
import { eventLine, finalLine, summaryTable, taskJson } from './format.js';
import { ExitCode, err, out } from './io.js';
import { errorLines } from './errors.js';
import { explainBusError } from './runtime.js';

export type FollowEnd =
  /** `missed`: events of the task that never reached this follower (a NATS failover can drop them). */
  | { kind: 'ended'; state: TaskState; missed: number }
  | { kind: 'rejected'; event: TaskEvent }
  | { kind: 'timeout' }
  | { kind: 'interrupted' }
  /** No event came within the idle limit (see FollowOptions.idleMs). */
  | { kind: 'idle'; sawEvents: boolean };

export interface FollowOptions {
  /** Give up after this long; 0 or absent waits as long as the task runs. */
  timeoutMs?: number;
  /**
   * Stop when no event arrives for this long: for a task that already ended (its history may have
   * aged out of the events stream) or one not known yet. With `idleUntilFirstEvent`, only the wait
   * for the first event is limited.
   */
  idleMs?: number;
  idleUntilFirstEvent?: boolean;
  onEvent?: (ev: TaskEvent) => void;
  /** Test seam: where Ctrl-C is listened for. */
  signals?: Pick<NodeJS.Process, 'on' | 'off'>;
}

/** The task's state read now and then while its events are followed: after 1 s, then 2, 4, 5, 5… s. */
const STATE_READ_FIRST_MS = 1_000;
const STATE_READ_MAX_MS = 5_000;

/**
 * Watches a task's events (history, then live) until it ends, the time limit passes, the idle limit
 * passes, or the user presses Ctrl-C (a second Ctrl-C exits at once).
 *
 * Besides the events, the task's state is read now and then, as `client.wait()` does: events are
 * history the scheduler publishes without waiting for JetStream (decision 0008), so a NATS failover
 * can drop one — the task's end included — while the state in Redis is the truth. Two reads in a row
 * that find the task ended end the follow (the first gives its last events time to arrive).
 */
export async function followTask(client: TriadClient, taskId: string, o: FollowOptions = {}): Promise<FollowEnd> {
  const ac = new AbortController();
  let why: 'timeout' | 'interrupted' | 'idle' | 'ended' | undefined;
  const stop = (w: NonNullable<typeof why>): void => {
    if (why) return;
    why = w;
    ac.abort();
  };
  const aborted = new Promise<'aborted'>((resolve) => ac.signal.addEventListener('abort', () => resolve('aborted'), { once: true }));
  const timer = o.timeoutMs ? setTimeout(() => stop('timeout'), o.timeoutMs) : undefined;
  let idleTimer: NodeJS.Timeout | undefined;
  const armIdle = (): void => {
    if (idleTimer) clearTimeout(idleTimer);
    idleTimer = o.idleMs ? setTimeout(() => stop('idle'), o.idleMs) : undefined;
  };
  armIdle();
  let interrupts = 0;
  const onSigint = (): void => {
    interrupts += 1;
    if (interrupts > 1) process.exit(ExitCode.Interrupted);
    stop('interrupted');
  };
  const signals = o.signals ?? process;
  signals.on('SIGINT', onSigint);

  let rejected: TaskEvent | undefined;
  let sawEvents = false;
  const seen = new Set<number>();
  let endedState: TaskState | undefined;
  const stateReads = (async () => {
    let seenEnded = false;
    for (let delay = STATE_READ_FIRST_MS; !ac.signal.aborted; delay = Math.min(delay * 2, STATE_READ_MAX_MS)) {
      await sleep(delay, undefined, { signal: ac.signal }).catch(() => undefined);
      if (ac.signal.aborted) return;
      const state = await client.getTask(taskId).catch(() => undefined);
      const terminal = state !== undefined && isTerminal(state.status);
      if (terminal && seenEnded) {
        endedState = state;
        stop('ended');
        return;
      }
      seenEnded = terminal;
    }
  })();
  const it = client.watch(taskId, { signal: ac.signal })[Symbol.asyncIterator]();
  try {
    for (;;) {
      // Raced against the abort: the SDK's iterator may not notice an abort that comes while it is
      // still creating its consumer.
      const next = it.next();
      next.catch(() => undefined);
      const r = await Promise.race([next, aborted]);
      if (r === 'aborted' || r.done) break;
      const ev = r.value;
      sawEvents = true;
      if (ev.seq > 0) seen.add(ev.seq);
      if (o.idleUntilFirstEvent) {
        if (idleTimer) clearTimeout(idleTimer);
        idleTimer = undefined;
      } else {
        armIdle();
      }
      o.onEvent?.(ev);
      if (ev.type === 'rejected') rejected = ev;
    }
  } catch (e) {
    if (!why) throw explainBusError(e, `watch task ${taskId}`, client.namespace);
  } finally {
    if (timer) clearTimeout(timer);
    if (idleTimer) clearTimeout(idleTimer);
    signals.off('SIGINT', onSigint);
    if (why) void it.return(undefined).catch(() => undefined);
    if (!why) ac.abort();
    await stateReads;
  }
  if (why === 'timeout') return { kind: 'timeout' };
  if (why === 'interrupted') return { kind: 'interrupted' };
  if (why === 'idle') return { kind: 'idle', sawEvents };
  if (rejected) return { kind: 'rejected', event: rejected };
  const state = endedState ?? (await client.getTask(taskId));
  return { kind: 'ended', state, missed: missedEvents(seen, state.seq) };
}

/** How many of the task's events 1..`lastSeq` were not seen. */
function missedEvents(seen: ReadonlySet<number>, lastSeq: number): number {
  let missed = 0;
  for (let seq = 1; seq <= lastSeq; seq++) if (!seen.has(seq)) missed++;
  return missed;
}

/**
 * How a followed task is printed:
 * - "human": event lines, then the outcome line and a steps summary;
 * - "object": exactly one JSON object on stdout at the end (events go to stderr when it is a terminal);
 * - "lines": one JSON line per event, then one JSON line with the final state.
 */
export type FollowOutput = 'human' | 'object' | 'lines';

export interface ShowFollowOptions {
  output: FollowOutput;
  timeoutMs?: number;
  /** The task already ended (its events may have aged out): stop after this long without events. */
  idleMs?: number;
  idleUntilFirstEvent?: boolean;
  /** The state to report when the idle limit passes (the task's state read before watching). */
  known?: TaskState;
}

/** Follows a task, prints it, and returns the exit code: 0 only when the task completed. */
export async function showFollow(client: TriadClient, taskId: string, o: ShowFollowOptions): Promise<number> {
  const onEvent = (ev: TaskEvent): void => {
    if (o.output === 'lines') out(JSON.stringify(ev));
    else if (o.output === 'human') out(eventLine(ev));
    else if (process.stderr.isTTY) err(eventLine(ev));
  };
  const end = await followTask(client, taskId, {
    ...(o.timeoutMs ? { timeoutMs: o.timeoutMs } : {}),
    ...(o.idleMs ? { idleMs: o.idleMs, idleUntilFirstEvent: o.idleUntilFirstEvent ?? false } : {}),
    onEvent,
  });
  const stillRunning = `it may still finish: check with "triad status ${taskId}" or follow it with "triad watch ${taskId}"`;
  switch (end.kind) {
    case 'ended':
      if (end.missed > 0) {
        err(
          `triad: ${end.missed} of task ${taskId}'s ${end.state.seq} events did not reach this follower (lost in a NATS failover, or aged out of the stream); the outcome below is read from the state store. "triad watch ${taskId}" shows the stored history.`,
        );
      }
      // `--json` prints the outcome whole: large payloads downloaded (decision 0021, open question 2).
      return showFinal(o.output === 'object' ? await client.resolvePayloads(end.state) : end.state, o.output);
    case 'idle':
      if (o.known) return showFinal(await client.getTask(taskId).catch(() => o.known as TaskState), o.output);
      throw new TriadError(ErrorCode.UnknownTask, `task ${taskId} is not known in namespace "${client.namespace}" (no state and no events): check the id with "triad list"`);
    case 'rejected': {
      const ev = end.event;
      const error = ev.error ? TriadError.fromWire(ev.error) : new TriadError(ErrorCode.InvalidMessage, ev.reason ?? 'rejected');
      if (o.output === 'object') out(JSON.stringify({ taskId, status: 'rejected', steps: [], error: error.message }, null, 2));
      for (const line of errorLines(new TriadError(error.code, `task ${taskId} was rejected: ${error.message}`, { details: error.details }))) err(line);
      return ExitCode.Failure;
    }
    case 'timeout': {
      if (o.output === 'object') {
        const current = await client.getTask(taskId).catch(() => undefined);
        out(JSON.stringify(current ? { ...taskJson(current), timedOut: true } : { taskId, status: 'unknown', steps: [], timedOut: true }, null, 2));
      }
      err(`triad: task ${taskId} did not finish within ${o.timeoutMs} ms; ${stillRunning}`);
      return ExitCode.Failure;
    }
    case 'interrupted': {
      if (o.output === 'object') {
        const current = await client.getTask(taskId).catch(() => undefined);
        out(JSON.stringify(current ? { ...taskJson(current), interrupted: true } : { taskId, status: 'unknown', steps: [], interrupted: true }, null, 2));
      }
      err(`triad: stopped following task ${taskId} (interrupted); the task goes on: ${stillRunning.replace('it may still finish: ', '')}`);
      return ExitCode.Interrupted;
    }
  }
}

function showFinal(state: TaskState, output: FollowOutput): number {
  if (output === 'object') out(JSON.stringify(taskJson(state), null, 2));
  else if (output === 'lines') out(JSON.stringify(taskJson(state)));
  else {
    out('');
    out(finalLine(state));
    if (state.steps.length > 0) {
      out('');
      out(summaryTable(state.steps));
    }
  }
  return state.status === 'completed' ? ExitCode.Ok : ExitCode.Failure;
}

/** True when the error says the task does not exist. */
export function isUnknownTask(e: unknown): boolean {
  return isTriadError(e, ErrorCode.UnknownTask);
}
