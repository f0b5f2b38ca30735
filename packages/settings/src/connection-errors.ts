/**
 * The messages of a connection that cannot work as configured — a setting's file that cannot be read,
 * a TLS handshake that fails — shared by the NATS and Redis connect functions, so both name the
 * setting to fix the same way. Pure: the callers do the I/O and hand the error in.
 */
import { ErrorCode, TriadError, errorMessage } from '@triad/protocol';

/** A setting's file that is missing, unreadable or empty: INVALID_CONFIG naming the setting and what it must hold. */
export function unreadableSettingFile(label: string, file: string, what: string, cause?: unknown): TriadError {
  const code = (cause as { code?: unknown } | undefined)?.code;
  const why =
    cause === undefined
      ? 'it is empty'
      : code === 'ENOENT'
        ? 'no such file'
        : code === 'EACCES'
          ? 'permission denied'
          : code === 'EISDIR'
            ? 'it is a directory'
            : errorMessage(cause);
  return new TriadError(ErrorCode.InvalidConfig, `cannot read ${label} file "${file}" (${why}): set ${label} to ${what}`, {
    ...(cause === undefined ? {} : { cause }),
  });
}

/**
 * How a TLS connection failed: the client could not trust the server's certificate, the certificate
 * does not name the host, or is out of date, the server sent an alert (it refused our certificate or
 * the lack of one), or the other end does not speak TLS there.
 */
export type TlsFailure = 'untrusted' | 'hostname' | 'expired' | 'refused' | 'protocol';

const UNTRUSTED = new Set([
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'SELF_SIGNED_CERT_IN_CHAIN',
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'UNABLE_TO_GET_ISSUER_CERT',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'CERT_UNTRUSTED',
  'CERT_SIGNATURE_FAILURE',
  'CERT_REJECTED',
  'INVALID_CA',
  'CERT_REVOKED',
]);
const EXPIRED = new Set(['CERT_HAS_EXPIRED', 'CERT_NOT_YET_VALID']);

/** The code of an error or of one of its causes (Node puts TLS codes on the error it emits). */
export function errorCodes(e: unknown): string[] {
  const codes: string[] = [];
  for (let cur: unknown = e, depth = 0; cur !== undefined && cur !== null && depth < 5; depth++) {
    const code = (cur as { code?: unknown }).code;
    if (typeof code === 'string') codes.push(code);
    cur = (cur as { cause?: unknown }).cause;
  }
  return codes;
}

export function tlsFailure(e: unknown): TlsFailure | undefined {
  for (const code of errorCodes(e)) {
    if (UNTRUSTED.has(code)) return 'untrusted';
    if (EXPIRED.has(code)) return 'expired';
    if (code === 'ERR_TLS_CERT_ALTNAME_INVALID') return 'hostname';
    if (/^ERR_SSL_.*ALERT/.test(code)) return 'refused';
    if (code.startsWith('ERR_SSL_') || code === 'EPROTO') return 'protocol';
  }
  return undefined;
}

export interface TlsContext {
  /** "NATS" or "Redis". */
  service: string;
  /** The server(s) the connection went to. */
  where: string;
  /** The CA setting's label, and its file when set. */
  ca: { label: string; file?: string };
  /** The client certificate settings; undefined when this connection cannot send one. */
  clientCert?: { certLabel: string; keyLabel: string; file?: string };
  /** Settings to check when the other end does not speak TLS. */
  protocolHint: string;
}

/**
 * An error's text fit for a one-line message: OpenSSL's "…:SSL routines:<function>:<reason>:<file>:<line>…"
 * becomes its reason with the error code ("ERR_SSL_SSLV3_ALERT_BAD_CERTIFICATE: sslv3 alert bad certificate").
 */
export function tlsDetail(e: unknown): string {
  const message = e instanceof Error ? e.message : String(e);
  const reason = /SSL routines:[^:]*:([^:]+)/.exec(message)?.[1]?.trim();
  const code = errorCodes(e)[0];
  if (reason !== undefined) return code !== undefined ? `${code}: ${reason}` : reason;
  return message.split('\n')[0]!.trim();
}

/** INVALID_CONFIG for a TLS failure, naming the setting that decides it. */
export function explainTlsFailure(kind: TlsFailure, e: unknown, c: TlsContext): TriadError {
  const detail = tlsDetail(e);
  let message: string;
  switch (kind) {
    case 'untrusted':
      message =
        c.ca.file === undefined
          ? `cannot verify the TLS certificate of ${c.service} at ${c.where} (${detail}): set ${c.ca.label} to the PEM file of the CA that signed it`
          : `the TLS certificate of ${c.service} at ${c.where} is not signed by the CA in ${c.ca.label} ("${c.ca.file}") (${detail}): set ${c.ca.label} to the CA that signed the server's certificate`;
      break;
    case 'expired':
      message = `the TLS certificate of ${c.service} at ${c.where} has expired or is not valid yet (${detail}): renew the server's certificate (or check this machine's clock)`;
      break;
    case 'hostname':
      message = `the TLS certificate of ${c.service} at ${c.where} does not name that host (${detail}): connect by a name or IP address the certificate lists, or reissue the certificate with it`;
      break;
    case 'refused':
      message =
        c.clientCert === undefined
          ? `${c.service} at ${c.where} refused the TLS connection (${detail}): it probably requires a client certificate, which Triad does not send to ${c.service}; let the server accept clients without one (for Redis: tls-auth-clients no)`
          : c.clientCert.file === undefined
            ? `${c.service} at ${c.where} refused the TLS connection (${detail}): it requires a client certificate; set ${c.clientCert.certLabel} and ${c.clientCert.keyLabel}`
            : `${c.service} at ${c.where} refused the TLS client certificate from ${c.clientCert.certLabel} ("${c.clientCert.file}") (${detail}): check that it is signed by a CA the server trusts and is not expired`;
      break;
    case 'protocol':
      message = `TLS with ${c.service} at ${c.where} failed (${detail}): ${c.protocolHint}`;
      break;
  }
  return new TriadError(ErrorCode.InvalidConfig, message, { cause: e });
}
