/**
 * Loads the Lua transitions once (inlining `--@include` fragments) and runs them through one wrapper:
 * EVALSHA first, EVAL on NOSCRIPT (after a Redis restart or failover). Each script is known by its
 * name and the hash of its text, so two Triad versions can share a Redis.
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import { triadMetrics } from '@triad/telemetry';
import { isCluster, type RedisClient } from './client.js';

const LUA_DIR = new URL('../lua/', import.meta.url);

export const SCRIPT_NAMES = ['createTask', 'applyResult', 'expireStep', 'expireTask', 'retryStep', 'cancelTask', 'releaseLeases', 'purgeFinished', 'compactFinished', 'fenceBucket', 'registerWorkflow', 'elect', 'resign', 'raiseEpoch', 'takeIntakeSlot', 'signalTask', 'putSchedule', 'pauseSchedule', 'deleteSchedule', 'fireSchedule', 'limitApply', 'limitPump', 'limitConfigure', 'limitStats', 'limitPlace', 'limitRetire', 'limitRegister', 'querySearch', 'startOp', 'checkpointOp', 'endOp', 'attachObjects', 'startQueued', 'startChild', 'cancelChild', 'undoChild', 'takeParentNotice', 'childEnded', 'dropParentNotice', 'admitTask'] as const;
export type ScriptName = (typeof SCRIPT_NAMES)[number];

export interface LoadedScript {
  readonly name: ScriptName;
  readonly lua: string;
  readonly sha: string;
}

function readLua(file: string, seen: Set<string> = new Set()): string {
  if (seen.has(file)) throw new Error(`Lua include cycle at ${file}`);
  seen.add(file);
  return inlineIncludes(readFileSync(new URL(`${file}.lua`, LUA_DIR), 'utf8'), seen);
}

/** A Lua text with each `--@include <fragment>` line replaced by that fragment of lua/ (recursively). */
export function inlineIncludes(text: string, seen: ReadonlySet<string> = new Set()): string {
  return text.replace(/^--@include (\w+)\s*$/gm, (_m, inc: string) => readLua(inc, new Set(seen)));
}

/**
 * ioredis has evalshaBuffer/evalBuffer at runtime but not in its type declarations; `callBuffer` is typed
 * but loses its command name under auto-pipelining (off in connectRedis, but a caller may turn it on), so the
 * typed escape hatch is this interface.
 */
interface BufferScripting {
  evalshaBuffer(sha: string, ...args: (string | number | Buffer)[]): Promise<unknown>;
  evalBuffer(lua: string, ...args: (string | number | Buffer)[]): Promise<unknown>;
}

let cache: Map<ScriptName, LoadedScript> | undefined;

export function loadScripts(): Map<ScriptName, LoadedScript> {
  if (!cache) {
    cache = new Map();
    for (const name of SCRIPT_NAMES) {
      const lua = readLua(name);
      cache.set(name, { name, lua, sha: createHash('sha1').update(lua).digest('hex') });
    }
  }
  return cache;
}

/** The namespace a script call works in: every key starts `triad:<namespace>:` (keys.ts). */
function namespaceOf(keys: readonly string[]): string {
  return /^triad:([A-Za-z0-9_-]+)/.exec(keys[0] ?? '')?.[1] ?? '';
}

/** Runs a script, returning Redis' reply with bulk strings as Buffers; its time goes to triad_redis_script_duration_seconds. */
export async function runScript(redis: RedisClient, name: ScriptName, keys: readonly string[], args: readonly (string | number | Buffer | Uint8Array)[]): Promise<unknown> {
  const started = performance.now();
  try {
    return await callScript(redis, name, keys, args);
  } finally {
    triadMetrics().scriptDuration.observe({ namespace: namespaceOf(keys), script: name }, (performance.now() - started) / 1000);
  }
}

async function callScript(redis: RedisClient, name: ScriptName, keys: readonly string[], args: readonly (string | number | Buffer | Uint8Array)[]): Promise<unknown> {
  const script = loadScripts().get(name);
  if (!script) throw new Error(`unknown script ${name}`);
  const argv = args.map((a) => (a instanceof Uint8Array && !Buffer.isBuffer(a) ? Buffer.from(a.buffer, a.byteOffset, a.byteLength) : a));
  const rest: (string | number | Buffer)[] = [keys.length, ...keys, ...argv];
  const r = redis as unknown as BufferScripting;
  coalesceWrites(redis);
  try {
    return await r.evalshaBuffer(script.sha, ...rest);
  } catch (e) {
    if (e instanceof Error && e.message.startsWith('NOSCRIPT')) return r.evalBuffer(script.lua, ...rest);
    throw e;
  }
}

/**
 * Script calls made in one turn of the event loop leave in one socket write: the first corks the
 * connection's socket and the end of the turn (process.nextTick) uncorks it. The scheduler applies a
 * results batch (a few dozen results under load) as one script call per result; without this each call
 * was its own write system call. Measured (docs/performance.md, round 5): the scheduler's write calls
 * 1.8 → 0.25 per step and its CPU per step 5–9 % lower in three pairs. Unlike ioredis' auto-pipelining,
 * which waits for a setImmediate (about 55 µs per transition at low load), nothing waits: the turn was
 * ending anyway. On a cluster ioredis writes to each node's connection itself: left alone.
 */
function coalesceWrites(redis: RedisClient): void {
  if (isCluster(redis)) return;
  const socket = redis.stream;
  if (!socket || socket.destroyed || socket.writableCorked > 0) return;
  socket.cork();
  process.nextTick(() => socket.uncork());
}
