// `triad schedules list`'s text: how a schedule fires, in the units `--every` takes, and its table.
import { describe, expect, it } from 'vitest';
import type { Schedule } from '@triad/protocol';
import { everyText, schedulesTable, timingText } from '../src/commands/schedules.js';

describe('schedules text', () => {
  it('an interval in the largest unit that divides it; a cron pattern with its time zone', () => {
    expect([1_000, 10_000, 90_000, 300_000, 7_200_000, 86_400_000, 1_500].map(everyText)).toEqual(['1s', '10s', '90s', '5m', '2h', '1d', '1500ms']);
    expect(timingText({ every: 10_000 })).toBe('every 10s');
    expect(timingText({ cron: '0 2 * * *', timezone: 'Europe/Paris' })).toBe('cron "0 2 * * *" (Europe/Paris)');
    expect(timingText({ cron: '*/5 * * * *' })).toBe('cron "*/5 * * * *" (UTC)');
  });

  it('lists each schedule on one row: a pinned version, paused, no next tick, the last task and the counts', () => {
    const s: Schedule = { name: 'nightly', workflow: 'report', version: 2, client: 'web', cron: '0 2 * * *', timezone: 'UTC', overlap: 'skip', paused: true, createdAt: 0, updatedAt: 0, generation: 3, lastTick: Date.UTC(2026, 0, 2, 2), lastTaskId: 'sch:nightly:1767319200000', fired: 4, skipped: 1, missed: 2 };
    const lines = schedulesTable([s]).split('\n');
    expect(lines[0]).toMatch(/^NAME\s+WORKFLOW\s+WHEN\s+OVERLAP\s+PAUSED\s+NEXT TICK\s+LAST TICK\s+LAST TASK\s+FIRED\s+SKIPPED\s+MISSED$/);
    expect(lines[1]).toMatch(/^nightly\s+report@2\s+cron "0 2 \* \* \*" \(UTC\)\s+skip\s+yes\s+-\s+2026-01-02T02:00:00\.000Z\s+sch:nightly:1767319200000\s+4\s+1\s+2$/);
  });
});
