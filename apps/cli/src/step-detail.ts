/**
 * What a step waits for, or why it did not run, as one line (decision 0019 §7): the DETAIL of `triad
 * status` and the dashboard's task page (its bundle includes this module). Pure: no I/O, no colour.
 * Built kind by kind with decision 0019's increments: a skipped step's reason today.
 */
import type { StepState } from '@triad/protocol';

export function stepDetail(s: Pick<StepState, 'status' | 'reason'>): string | undefined {
  if (s.status === 'skipped') return s.reason ? `skipped: ${s.reason}` : 'skipped';
  return undefined;
}
