/**
 * @triad/settings — a process's settings from its environment: TRIAD_* configuration (loadConfig), the
 * NATS and Redis connection settings (servers, the one auth method, TLS files) with their validation, and
 * the messages of a connection that cannot work as configured. Pure checks: the connect functions in
 * @triad/bus and @triad/store read the files and open the connections.
 *
 * @example
 *   import { loadConfig } from '@triad/settings';
 *   const config = loadConfig(process.env); // throws TriadError INVALID_CONFIG naming every bad variable
 */
export { loadConfig, ConfigSchema, type Config } from './config.js';
export {
  CONNECTION_VARIABLES,
  DEFAULT_NATS_URL,
  DEFAULT_REDIS_URL,
  checkNatsSettings,
  checkRedisSettings,
  natsOptionsFromEnv,
  parseNatsSettings,
  parseRedisSettings,
  redactUrl,
  redisOptionsFromEnv,
  resolveLabels,
  type ConnectionVariable,
  type Labels,
  type NatsAuth,
  type NatsSettings,
  type NatsConnectionOptions,
  type NatsTlsFiles,
  type RedisSettings,
  type RedisConnectionOptions,
  type SettingLabels,
  type SettingProblem,
} from './connection-settings.js';
export { errorCodes, explainTlsFailure, tlsDetail, tlsFailure, unreadableSettingFile, type TlsContext, type TlsFailure } from './connection-errors.js';
export { payloadSettingsFromEnv, type PayloadSettings } from './payloads.js';
