/**
 * @triad/permissions — what each role of a namespace may do: NATS publish/subscribe allow lists (JetStream
 * API subjects included) and accounts, and Redis ACL rules with the commands each role's scripts call,
 * derived from @triad/protocol's subjects (decisions 0010, 0016, 0022). Written by `triad auth init`;
 * tabulated in docs/security.md. No I/O.
 */
export {
  ROLES,
  READ_ONLY_API_OPS,
  CLIENT_API_OPS,
  OPERATOR_CLIENT_ID,
  REDIS_SCRIPT_COMMANDS,
  REDIS_ROLE_SCRIPTS,
  DeploymentSchema,
  serviceInboxPrefix,
  schedulerIdentity,
  supervisorIdentity,
  agentIdentity,
  clientIdentity,
  operatorIdentity,
  deploymentIdentities,
  deploymentAccounts,
  triadAccountName,
  clientAccountName,
  redisAclLine,
  subjectMatches,
  rolesAllowed,
  type Role,
  type Identity,
  type NatsPermissions,
  type RedisPermissions,
  type DeploymentInput,
  type NatsAccount,
  type NatsExport,
} from './permissions.js';
