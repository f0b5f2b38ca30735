/**
 * Every command group, in the order `triad --help` lists them. A new command is one file exporting
 * `register(program)`, added here.
 */
import type { Command } from 'commander';
import * as alerts from './alerts.js';
import * as auth from './auth.js';
import * as cancel from './cancel.js';
import * as count from './count.js';
import * as dashboard from './dashboard.js';
import * as dlq from './dlq.js';
import * as intake from './intake.js';
import * as list from './list.js';
import * as ops from './ops.js';
import * as payload from './payload.js';
import * as retry from './retry.js';
import * as schedules from './schedules.js';
import * as signal from './signal.js';
import * as status from './status.js';
import * as stuck from './stuck.js';
import * as submit from './submit.js';
import * as supervisor from './supervisor.js';
import * as watch from './watch.js';
import * as workflows from './workflows.js';

export interface CommandModule {
  register(program: Command): void;
}

export const commands: readonly CommandModule[] = [submit, status, stuck, payload, watch, list, count, workflows, signal, cancel, retry, ops, schedules, alerts, dlq, intake, supervisor, dashboard, auth];
