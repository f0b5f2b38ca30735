/**
 * @triad/supervisor — the Supervisor actor: leader-elected, sweeps expired steps from the deadline index,
 * applies each step's failure ladder, asks the scheduler to retry, raises operator alerts; and runs retention
 * (finished tasks removed after their retention time, the never-retried ones compacted before that).
 */
export { Supervisor, DEFAULT_COMPACT_AFTER_MS, type SupervisorOptions } from './supervisor.js';
