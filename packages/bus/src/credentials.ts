/**
 * Reads the files the NATS settings name (creds, nkey seed, TLS PEM files) and turns them into the
 * nats.js authenticator and `tls` option, checking each before the first connection so a wrong file is
 * refused naming its setting instead of failing somewhere inside the handshake.
 */
import { readFile } from 'node:fs/promises';
import { createSecureContext } from 'node:tls';
import {
  credsAuthenticator,
  nkeyAuthenticator,
  tokenAuthenticator,
  usernamePasswordAuthenticator,
  type Authenticator,
  type TlsOptions,
} from '@nats-io/nats-core';
import { ErrorCode, TriadError, errorMessage } from '@triad/protocol';
import { unreadableSettingFile, type NatsSettings } from '@triad/settings';

export interface NatsCredentials {
  authenticator?: Authenticator;
  /** The user's public nkey (creds, nkey seed), for messages: it is what the server lists. */
  publicKey?: string;
  tls?: TlsOptions;
}

const CREDS_WHAT = 'the path of a .creds file (a user JWT and its nkey seed, as `nsc generate creds` writes)';
const SEED_WHAT = 'the path of a file holding a user nkey seed (a line starting with "SU")';
const CA_WHAT = 'the path of a PEM file with the CA certificate that signed the server certificate';
const CERT_WHAT = 'the path of a PEM file with the client certificate';
const KEY_WHAT = "the path of a PEM file with the client certificate's private key";

/** A file's text; missing, unreadable and empty files are refused naming the setting. */
export async function readSettingFile(label: string, file: string, what: string): Promise<string> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (e) {
    throw unreadableSettingFile(label, file, what, e);
  }
  if (text.trim() === '') throw unreadableSettingFile(label, file, what);
  return text;
}

function invalidFile(label: string, file: string, problem: string, what: string, cause?: unknown): TriadError {
  return new TriadError(ErrorCode.InvalidConfig, `${label} file "${file}" ${problem}: set ${label} to ${what}`, cause === undefined ? {} : { cause });
}

/** The public key an authenticator presents (calling it checks the JWT and seed it holds). */
function publicKeyOf(authenticator: Authenticator): string | undefined {
  const auth = authenticator('nonce') as { nkey?: unknown } | undefined;
  return typeof auth?.nkey === 'string' ? auth.nkey : undefined;
}

export async function loadNatsCredentials(s: NatsSettings): Promise<NatsCredentials> {
  const l = s.labels;
  const out: NatsCredentials = {};
  const auth = s.auth;
  if (auth?.method === 'creds') {
    const text = await readSettingFile(l.NATS_CREDS, auth.credsFile, CREDS_WHAT);
    const authenticator = credsAuthenticator(new TextEncoder().encode(text));
    try {
      out.publicKey = publicKeyOf(authenticator);
    } catch (e) {
      throw invalidFile(l.NATS_CREDS, auth.credsFile, `is not a NATS credentials file (${errorMessage(e)})`, CREDS_WHAT, e);
    }
    out.authenticator = authenticator;
  } else if (auth?.method === 'nkey') {
    const text = await readSettingFile(l.NATS_NKEY_SEED, auth.seedFile, SEED_WHAT);
    // A seed file may also hold the public key (as `nk -gen user -pubout` prints): take the seed.
    const seed = /\bSU[A-Z2-7]{50,}\b/.exec(text)?.[0];
    if (seed === undefined) {
      const other = /\bS[A-Z][A-Z2-7]{50,}\b/.test(text) ? 'holds an nkey seed that is not a user seed (it must start with "SU")' : 'holds no user nkey seed';
      throw invalidFile(l.NATS_NKEY_SEED, auth.seedFile, other, SEED_WHAT);
    }
    const authenticator = nkeyAuthenticator(new TextEncoder().encode(seed));
    try {
      out.publicKey = publicKeyOf(authenticator);
    } catch (e) {
      throw invalidFile(l.NATS_NKEY_SEED, auth.seedFile, `holds an invalid nkey seed (${errorMessage(e)})`, SEED_WHAT, e);
    }
    out.authenticator = authenticator;
  } else if (auth?.method === 'userPassword') {
    out.authenticator = usernamePasswordAuthenticator(auth.user, auth.password);
  } else if (auth?.method === 'token') {
    out.authenticator = tokenAuthenticator(auth.token);
  }

  if (s.tls) {
    const { caFile, certFile, keyFile } = s.tls;
    const tls: TlsOptions = {};
    if (caFile !== undefined) {
      tls.ca = await readSettingFile(l.NATS_TLS_CA, caFile, CA_WHAT);
      // Node ignores a CA that is not a certificate (and then trusts nothing we meant it to): check.
      if (!tls.ca.includes('-----BEGIN CERTIFICATE-----')) throw invalidFile(l.NATS_TLS_CA, caFile, 'holds no PEM certificate (-----BEGIN CERTIFICATE-----)', CA_WHAT);
    }
    if (certFile !== undefined && keyFile !== undefined) {
      tls.cert = await readSettingFile(l.NATS_TLS_CERT, certFile, CERT_WHAT);
      tls.key = await readSettingFile(l.NATS_TLS_KEY, keyFile, KEY_WHAT);
      try {
        createSecureContext({ cert: tls.cert, key: tls.key });
      } catch (e) {
        const code = (e as { code?: unknown }).code;
        if (code === 'ERR_OSSL_X509_KEY_VALUES_MISMATCH') {
          throw invalidFile(l.NATS_TLS_KEY, keyFile, `is not the private key of the certificate in ${l.NATS_TLS_CERT} ("${certFile}")`, KEY_WHAT, e);
        }
        try {
          createSecureContext({ cert: tls.cert });
        } catch (certError) {
          throw invalidFile(l.NATS_TLS_CERT, certFile, `holds no usable PEM certificate (${errorMessage(certError)})`, CERT_WHAT, certError);
        }
        throw invalidFile(l.NATS_TLS_KEY, keyFile, `holds no usable PEM private key (${errorMessage(e)})`, KEY_WHAT, e);
      }
    }
    out.tls = tls;
  }
  return out;
}
