/** @triad/cli as a library: the program (for tests and embedding) and its pure helpers. */
export { buildProgram, run } from './program.js';
export { commands, type CommandModule } from './commands/index.js';
export * from './format.js';
export * from './io.js';
export { authInit, readEnvFile, redisUserName, AuthInitSchema, type AuthInitInput, type AuthInitResult } from './auth-files.js';
export { LOCAL_DATA_FOLDER, localOperatorFile, lookupLocalOperator, workspaceRoot, type LocalOperatorLookup } from './local-credentials.js';
