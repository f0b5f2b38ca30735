/**
 * @triad/supervisor — the Supervisor actor: leader-elected, sweeps expired steps from the deadline index,
 * applies each step's failure ladder, asks the scheduler to retry, raises operator alerts.
 */
export { Supervisor, type SupervisorOptions } from './supervisor.js';
