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

export const SCRIPT_NAMES = ['createTask', 'applyResult', 'expireStep', 'expireTask', 'retryStep', 'cancelTask', 'releaseLeases', 'purgeFinished', 'compactFinished', 'fenceBucket', 'registerWorkflow', 'elect', 'resign', 'raiseEpoch', 'takeIntakeSlot', 'signalTask', 'putSchedule', 'pauseSchedule', 'deleteSchedule', 'fireSchedule', 'limitApply', 'limitPump', 'limitConfigure', 'limitStats', 'limitPlace', 'limitRetire', 'limitRegister', 'querySearch', 'startOp', 'checkpointOp', 'endOp', 'attachObjects', 'startQueued', 'startChild', 'cancelChild', 'undoChild', 'takeParentNotice', 'childEnded', 'dropParentNotice', 'childRefused'] as const;
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

/** Lua without its comments (long ones, then line ones): for finding the names a text uses. */
function stripComments(lua: string): string {
  return lua.replace(/--\[(=*)\[[\s\S]*?\]\1\]/g, '').replace(/--[^\n]*/g, '');
}

/** The names a text uses bare (not as a field: `x.name`, `x:name`), among `names`. */
function namesUsed(lua: string, names: readonly string[]): string[] {
  const bare = new Set(stripComments(lua).match(/(?<![\w.:])[A-Za-z_]\w*/g));
  return names.filter((n) => bare.has(n));
}

/**
 * Lazy definitions (`_common.lua`'s rare functions). Redis runs a script's whole chunk on every call, so a
 * `local function` at its top level is a closure built on every call, whether the call needs it or not.
 * Functions a transition seldom needs are therefore defined inside a builder function, between the lines
 * `--@lazy-begin` and `--@lazy-end`, and built on first use through an accessor (`rare()` in _common.lua).
 * Here:
 * - `--@lazy-end` becomes `return { <name> = <name>, … }` of every top-level local between the markers
 *   (a line at column 0 starting `local`);
 * - `--@lazy-imports <accessor>` becomes `local <name> = <accessor>().<name>` for each of those names the
 *   text outside the builder uses bare — the scripts keep naming them as before (a script that uses one
 *   builds them all on every call, as before this existed; the plain path's scripts, createTask and
 *   applyResult, call `<accessor>().<name>` only where they need one);
 * - it is an error when the text before the imports uses one of them bare (it would be a global there),
 *   or when `<accessor>().<name>` names none of them.
 */
export function resolveLazy(lua: string): string {
  const begin = lua.indexOf('\n--@lazy-begin\n');
  if (begin < 0) return lua;
  const end = lua.indexOf('\n--@lazy-end\n', begin);
  const imports = /^--@lazy-imports (\w+)\s*$/m.exec(lua);
  if (end < 0 || !imports) throw new Error('--@lazy-begin needs a --@lazy-end after it and a --@lazy-imports <accessor> line');
  if (lua.indexOf('\n--@lazy-begin\n', begin + 1) >= 0) throw new Error('one --@lazy-begin region per script');
  const body = lua.slice(begin, end);
  const names = [...new Set([...body.matchAll(/^local (?:function )?([\w, ]+?)\s*(?:=|\(|$)/gm)].flatMap((m) => m[1]!.split(',').map((n) => n.trim())))];
  const accessor = imports[1]!;
  const outside = lua.slice(0, begin) + lua.slice(end);
  const beforeImports = outside.slice(0, outside.indexOf(imports[0]));
  const early = namesUsed(beforeImports, names);
  if (early.length > 0) throw new Error(`${early.join(', ')}: lazily defined, so used before --@lazy-imports as ${accessor}().<name>`);
  for (const m of stripComments(outside).matchAll(new RegExp(`${accessor}\\(\\)\\.(\\w+)`, 'g'))) {
    if (!names.includes(m[1]!)) throw new Error(`${accessor}().${m[1]!}: no top-level local of that name between --@lazy-begin and --@lazy-end`);
  }
  const used = namesUsed(outside, names);
  return (
    lua.slice(0, end) +
    `\nreturn { ${names.map((n) => `${n} = ${n}`).join(', ')} }\n` +
    lua.slice(end + '\n--@lazy-end\n'.length).replace(imports[0], used.map((n) => `local ${n} = ${accessor}().${n}`).join('\n'))
  );
}

let cache: Map<ScriptName, LoadedScript> | undefined;

export function loadScripts(): Map<ScriptName, LoadedScript> {
  if (!cache) {
    cache = new Map();
    for (const name of SCRIPT_NAMES) {
      const lua = resolveLazy(readLua(name));
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
    if (!(e instanceof Error && e.message.startsWith('NOSCRIPT'))) throw e;
  }
  // Not loaded (a fresh server, a restart, a failover). The first caller sends the text with EVAL; calls
  // that failed meanwhile wait for it and try EVALSHA again, instead of each sending the text: a
  // scheduler starting under load has dozens of calls in flight, and each EVAL of a ~100 KB script
  // costs Redis its SHA-1 and the transfer (measured: ~230 EVALs at a bench's start, 0.28 G instructions).
  const clientLoads = loading.get(redis) ?? new Map<ScriptName, Promise<unknown>>();
  loading.set(redis, clientLoads);
  const pending = clientLoads.get(name);
  if (pending) {
    await pending.catch(() => undefined);
    try {
      return await r.evalshaBuffer(script.sha, ...rest);
    } catch (e) {
      // Another node of a cluster, or flushed again in between: this call sends the text itself.
      if (!(e instanceof Error && e.message.startsWith('NOSCRIPT'))) throw e;
      return r.evalBuffer(script.lua, ...rest);
    }
  }
  const load = r.evalBuffer(script.lua, ...rest);
  clientLoads.set(name, load);
  try {
    return await load;
  } finally {
    if (clientLoads.get(name) === load) clientLoads.delete(name);
  }
}

/** Per connection, the script whose text an EVAL is sending now (see callScript). */
const loading = new WeakMap<RedisClient, Map<ScriptName, Promise<unknown>>>();

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
