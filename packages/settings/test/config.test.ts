// loadConfig: the TRIAD_* configuration and the connection settings from the environment, every problem named.
import { describe, expect, it } from 'vitest';
import { ErrorCode, isTriadError, type TriadError } from '@triad/protocol';
import { loadConfig } from '../src/index.js';

describe('loadConfig', () => {
  it('applies defaults for an empty environment (empty strings count as unset)', () => {
    expect(loadConfig({})).toEqual({
      natsUrl: 'nats://127.0.0.1:4222',
      redisUrl: 'redis://127.0.0.1:6379',
      namespace: 'default',
      clientId: 'default',
      logLevel: 'info',
      redisWaitReplicas: 0,
      redisWaitMs: 1_000,
      stepBatches: 'on',
      clientActiveTasks: 0,
      limitsRefreshMs: 1_000,
      eventBatches: 'off',
      nats: {},
      redis: {},
      redlock: [],
    });
    expect(loadConfig({ NATS_URL: '', REDIS_URL: '' }).redisUrl).toBe('redis://127.0.0.1:6379');
    expect(loadConfig({ REDIS_URL: 'rediss://cache:6380', TRIAD_NAMESPACE: 'prod', TRIAD_LOG_LEVEL: 'debug', NATS_URL: 'nats://n:4222', TRIAD_CLIENT_ID: 'shop-1' })).toEqual({
      natsUrl: 'nats://n:4222',
      redisUrl: 'rediss://cache:6380',
      namespace: 'prod',
      clientId: 'shop-1',
      logLevel: 'debug',
      redisWaitReplicas: 0,
      redisWaitMs: 1_000,
      stepBatches: 'on',
      clientActiveTasks: 0,
      limitsRefreshMs: 1_000,
      eventBatches: 'off',
      nats: { url: 'nats://n:4222' },
      redis: { url: 'rediss://cache:6380' },
      redlock: [],
    });
  });

  it('reads TRIAD_CLIENT_ACTIVE_TASKS (0 turns admission off, decision 0024) and names it when it is not a whole number', () => {
    expect(loadConfig({ TRIAD_CLIENT_ACTIVE_TASKS: '0' }).clientActiveTasks).toBe(0);
    expect(loadConfig({ TRIAD_CLIENT_ACTIVE_TASKS: '500' }).clientActiveTasks).toBe(500);
    expect(() => loadConfig({ TRIAD_CLIENT_ACTIVE_TASKS: 'many' })).toThrow(/TRIAD_CLIENT_ACTIVE_TASKS/);
    expect(() => loadConfig({ TRIAD_CLIENT_ACTIVE_TASKS: '-1' })).toThrow(/TRIAD_CLIENT_ACTIVE_TASKS/);
  });

  it('reads TRIAD_STEP_BATCHES (on or off) and names it when it is neither', () => {
    expect(loadConfig({ TRIAD_STEP_BATCHES: 'off' }).stepBatches).toBe('off');
    expect(() => loadConfig({ TRIAD_STEP_BATCHES: 'maybe' })).toThrow(/TRIAD_STEP_BATCHES: set it to "on"/);
  });

  it('reads TRIAD_LIMITS_REFRESH_MS (decision 0020 §1.9: how soon a limit applies), 1000 by default, and names it when it is out of range', () => {
    expect(loadConfig({}).limitsRefreshMs).toBe(1_000);
    expect(loadConfig({ TRIAD_LIMITS_REFRESH_MS: '250' }).limitsRefreshMs).toBe(250);
    expect(() => loadConfig({ TRIAD_LIMITS_REFRESH_MS: '10' })).toThrow(/TRIAD_LIMITS_REFRESH_MS: expected a whole number of milliseconds from 100 to 60000 \(default 1000\)/);
    expect(() => loadConfig({ TRIAD_LIMITS_REFRESH_MS: 'soon' })).toThrow(/TRIAD_LIMITS_REFRESH_MS: expected a whole number of milliseconds/);
  });

  it('reads TRIAD_EVENT_BATCHES (on or off) and names it when it is neither', () => {
    expect(loadConfig({ TRIAD_EVENT_BATCHES: 'on' }).eventBatches).toBe('on');
    expect(() => loadConfig({ TRIAD_EVENT_BATCHES: 'maybe' })).toThrow(/TRIAD_EVENT_BATCHES: set it to "on"/);
  });

  it('reads TRIAD_REDLOCK_URLS as the leadership lease instances, and names the entry that is wrong', () => {
    expect(loadConfig({ TRIAD_REDLOCK_URLS: 'redis://a:1, redis://b:2,,redis://c:3' }).redlock.map((r) => r.url)).toEqual(['redis://a:1', 'redis://b:2', 'redis://c:3']);
    expect(() => loadConfig({ TRIAD_REDLOCK_URLS: 'redis://a:1,http://b:2' })).toThrow(/TRIAD_REDLOCK_URLS entry 2 must start with redis:\/\/ or rediss:\/\//);
  });

  it('names the environment variable that is wrong, every one of them', () => {
    const expectConfigError = (env: NodeJS.ProcessEnv, vars: string[]) => {
      try {
        loadConfig(env);
        expect.unreachable();
      } catch (e) {
        expect(isTriadError(e, ErrorCode.InvalidConfig)).toBe(true);
        const err = e as TriadError;
        for (const v of vars) {
          expect(err.message).toContain(v);
          expect(err.details.some((d) => d.startsWith(v))).toBe(true);
        }
        expect(err.details).toHaveLength(vars.length);
      }
    };
    expectConfigError({ REDIS_URL: 'http://localhost:6379' }, ['REDIS_URL']);
    expectConfigError({ TRIAD_NAMESPACE: 'bad.ns' }, ['TRIAD_NAMESPACE']);
    expectConfigError({ TRIAD_LOG_LEVEL: 'loud' }, ['TRIAD_LOG_LEVEL']);
    expectConfigError({ REDIS_URL: 'localhost', TRIAD_NAMESPACE: 'a b', TRIAD_LOG_LEVEL: 'trace' }, ['REDIS_URL', 'TRIAD_NAMESPACE', 'TRIAD_LOG_LEVEL']);
  });
});
