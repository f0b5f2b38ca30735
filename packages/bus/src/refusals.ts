/**
 * Tells a NATS connection that can never succeed as configured (credentials refused, TLS that fails)
 * from one that may succeed later (server down), and words the first kind naming the setting to fix.
 */
import { CLIENT_SCOPED_OPS, ErrorCode, NAMESPACE_PATTERN, TriadError, names } from '@triad/protocol';
import { explainTlsFailure, tlsFailure, type NatsSettings } from '@triad/settings';
import { rolesAllowed } from '@triad/permissions';
import type { NatsCredentials } from './credentials.js';

function isNamed(e: unknown, name: string): boolean {
  return e instanceof Error && (e.name === name || e.constructor.name === name);
}

/** The settings that decide TLS, for messages ("NATS_TLS_CA, NATS_TLS_CERT"). */
function tlsSettingsNamed(s: NatsSettings): string {
  const l = s.labels;
  const set = [s.tls?.caFile !== undefined ? l.NATS_TLS_CA : undefined, s.tls?.certFile !== undefined ? l.NATS_TLS_CERT : undefined].filter((x) => x !== undefined);
  return set.length > 0 ? set.join(' and ') : `${l.NATS_TLS_CA}/${l.NATS_TLS_CERT}/${l.NATS_TLS_KEY}`;
}

function authRefused(e: Error, s: NatsSettings, creds: NatsCredentials): TriadError {
  const l = s.labels;
  const where = s.servers.join(', ');
  const detail = e.message.toLowerCase();
  const auth = s.auth;
  const expired = isNamed(e, 'UserAuthenticationExpiredError') || /expired/.test(detail);
  let message: string;
  if (auth === undefined) {
    message = `NATS at ${where} requires credentials and none were given (${detail}): set ${l.NATS_CREDS}, ${l.NATS_NKEY_SEED}, ${l.NATS_USER} and ${l.NATS_PASSWORD}, or ${l.NATS_TOKEN}`;
  } else if (auth.method === 'creds') {
    message = `NATS refused the credentials from ${l.NATS_CREDS} ("${auth.credsFile}"${creds.publicKey ? `, user ${creds.publicKey}` : ''}): ${detail}; check ${
      expired ? 'the expiry of the user JWT and issue new credentials' : "that the file is current and its account is one this server's operator trusts"
    }`;
  } else if (auth.method === 'nkey') {
    message = `NATS refused the nkey from ${l.NATS_NKEY_SEED} ("${auth.seedFile}"${creds.publicKey ? `, public key ${creds.publicKey}` : ''}): ${detail}; check that the server's authorization lists this public key as a user`;
  } else if (auth.method === 'userPassword') {
    message = `NATS refused the credentials from ${l.NATS_USER}/${l.NATS_PASSWORD} (user "${auth.user}"): ${detail}; check the user name and password`;
  } else {
    message = `NATS refused the token from ${l.NATS_TOKEN}: ${detail}; check the token`;
  }
  return new TriadError(ErrorCode.InvalidConfig, message, { cause: e });
}

/**
 * The explained error when `e` means this connection cannot work as configured (retrying would not
 * help), else undefined.
 */
export function explainNatsRefusal(e: unknown, s: NatsSettings, creds: NatsCredentials): TriadError | undefined {
  if (e instanceof TriadError) return e;
  if (!(e instanceof Error)) return undefined;
  if (isNamed(e, 'AuthorizationError') || isNamed(e, 'UserAuthenticationExpiredError')) return authRefused(e, s, creds);
  const l = s.labels;
  const where = s.servers.join(', ');
  // nats.js: "server does not support 'tls'" (no TLS offered), or "tls is not available on this server".
  if (/does not support 'tls'|tls.*not available/i.test(e.message)) {
    return new TriadError(
      ErrorCode.InvalidConfig,
      `NATS at ${where} does not offer TLS (${e.message}), but ${tlsSettingsNamed(s)} ${s.tls?.caFile !== undefined && s.tls.certFile !== undefined ? 'are' : 'is'} set: enable TLS on the server (a tls block in its configuration), or unset the ${l.NATS_TLS_CA}/${l.NATS_TLS_CERT}/${l.NATS_TLS_KEY} settings`,
      { cause: e },
    );
  }
  const kind = tlsFailure(e);
  if (kind === undefined) return undefined;
  return explainTlsFailure(kind, e, {
    service: 'NATS',
    where,
    ca: { label: l.NATS_TLS_CA, ...(s.tls?.caFile !== undefined ? { file: s.tls.caFile } : {}) },
    clientCert: { certLabel: l.NATS_TLS_CERT, keyLabel: l.NATS_TLS_KEY, ...(s.tls?.certFile !== undefined ? { file: s.tls.certFile } : {}) },
    protocolHint: `check that ${l.NATS_URL} names the server's client port and that ${tlsSettingsNamed(s)} match its TLS configuration`,
  });
}

/** Whether a failed attempt found nothing listening (no point looking at TLS then). */
export function isConnectionRefused(e: unknown): boolean {
  return e instanceof Error && (/connection refused/i.test(e.message) || (e as { code?: unknown }).code === 'ECONNREFUSED');
}

/**
 * The explained error when NATS refused an operation for lack of permission (decision 0016): names the
 * subject, the roles that hold it, and what to do; else undefined.
 */
export function explainPermissionViolation(e: unknown, namespace: string): TriadError | undefined {
  if (!(e instanceof Error)) return undefined;
  // nats.js' PermissionViolationError, or an error that wraps its message (a request's).
  const m = /Permissions Violation for (Publish|Subscription) to "(\S+)"/i.exec(e.message);
  if (!isNamed(e, 'PermissionViolationError') && !m) return undefined;
  const pe = e as Error & { operation?: string; subject?: string; queue?: string };
  const subject = pe.subject ?? m?.[2] ?? '?';
  const op = (pe.operation ?? m?.[1]?.toLowerCase()) === 'subscription' ? 'subscribe' : 'publish';
  const allowed = rolesAllowed(namespace, op, subject);
  const verb = op === 'subscribe' ? `subscribe to "${subject}"${pe.queue ? ` (queue group ${pe.queue})` : ''}` : `publish to "${subject}"`;
  const who =
    allowed.length > 0
      ? `in namespace "${namespace}" only the ${allowed.join(', ')} role${allowed.length > 1 ? 's' : ''} may: connect with that role's credentials (the NATS_NKEY_SEED of its .env from \`triad auth init\`)`
      : `no Triad role of namespace "${namespace}" may: check that TRIAD_NAMESPACE, TRIAD_CLIENT_ID and the credentials belong together`;
  // A client identity reads its own tasks on its scoped subjects (decision 0017): say so to an older client.
  const n = op === 'publish' && NAMESPACE_PATTERN.test(namespace) ? names(namespace) : undefined;
  const scoped = n?.apiRequest(subject);
  const scopedOp = scoped && !scoped.client ? CLIENT_SCOPED_OPS.find((o) => o === scoped.op) : undefined;
  const hint = n && scopedOp ? `; a client identity reads its own tasks on ${n.subjects.clientApi('<client>', scopedOp)} (decision 0017)` : '';
  return new TriadError(ErrorCode.InvalidConfig, `NATS refused to let this connection ${verb}: the credentials it connected with lack that permission (${pe.message}); ${who}${hint}`, { cause: e });
}
