/**
 * @triad/supervisor — the Supervisor actor: leader-elected, sweeps expired steps from the deadline index,
 * applies each step's failure ladder, asks the scheduler to retry, raises operator alerts; and runs retention
 * (finished tasks removed after their retention time, the never-retried ones compacted before that).
 */
export { Supervisor, sweepDelay, MIN_SWEEP_GAP_MS, type SupervisorOptions } from './supervisor.js';
export { countNotice, supervisorMetrics, type NoticeInput, type SupervisorMetrics } from './telemetry.js';
export { ScheduleFiring, catchUpWindowMs, countTick, DUE_PER_SWEEP, type TickInput, type TickOutcome } from './schedules.js';
export { SupervisorSettingsSchema, SUPERVISOR_DEFAULTS, resolveSupervisorSettings, type SupervisorSettings, type ResolvedSupervisorSettings } from './options.js';
