/** Registered workflow definitions: immutable per version, a task pins the version it started with. */
import type { RedisClient } from './client.js';
import { ErrorCode, TriadError, WorkflowDefinitionSchema, type RegisteredWorkflow, type WorkflowDefinition } from '@triad/protocol';
import { canonicalJson, compilePlan, type PlanStep } from '@triad/core';
import { keys, type Keys } from './keys.js';
import { ScriptCode, scriptError } from './codes.js';
import { runScript } from './scripts.js';

/**
 * How long a scheduler keeps using the latest version it read: a version registered through another
 * scheduler is picked up by new submissions within this time (this scheduler's own registrations at once).
 */
const LATEST_CACHE_MS = 1_000;

export interface WorkflowSummary {
  name: string;
  latest: number;
  versions: number[];
  description?: string;
}

/** A registered version with its plan, compiled once (a version never changes once registered). */
export interface CompiledWorkflow {
  workflow: RegisteredWorkflow;
  plan: PlanStep[];
  /** The plan as every task of this version stores it. */
  planJson: string;
}

export class WorkflowStore {
  readonly keys: Keys;
  /**
   * The process's one workflow cache: versions never change once registered, so caching them — and their
   * compiled plans — is safe (and is not state a crash can lose).
   */
  private readonly cache = new Map<string, CompiledWorkflow>();
  /** The latest version per name, for a second: submissions without a version skip a round trip. */
  private readonly latest = new Map<string, { version: number; until: number }>();

  constructor(
    readonly redis: RedisClient,
    namespace: string,
  ) {
    this.keys = keys(namespace);
  }

  /** Stores a validated definition; returns its version and whether it was new. */
  async register(def: WorkflowDefinition, now: number): Promise<{ version: number; created: boolean }> {
    const { version: requested, ...body } = def;
    const canonical = canonicalJson(body);
    const reply = (await runScript(
      this.redis,
      'registerWorkflow',
      [this.keys.workflow(def.name), this.keys.workflows],
      [def.name, requested === undefined ? '' : requested, canonical, JSON.stringify(body), now],
    )) as unknown[];
    const code = Number(reply[0]);
    const version = Number(reply[1]);
    this.latest.delete(def.name);
    if (code === ScriptCode.Ok) return { version, created: true };
    if (code === ScriptCode.Exists) return { version, created: false };
    throw scriptError(code, `register workflow ${def.name} v${version}`);
  }

  /** A version, or the latest when `version` is absent; undefined if none is registered. */
  async get(name: string, version?: number): Promise<RegisteredWorkflow | undefined> {
    return (await this.compiled(name, version))?.workflow;
  }

  /** A version and its plan (compiled once per version), or the latest when `version` is absent. */
  async compiled(name: string, version?: number): Promise<CompiledWorkflow | undefined> {
    if (version !== undefined) {
      const hit = this.cache.get(`${name}@${version}`);
      if (hit) return hit;
    }
    const wfKey = this.keys.workflow(name);
    const cached = version === undefined ? this.latest.get(name) : undefined;
    if (cached && cached.until > Date.now()) return this.compiled(name, cached.version);
    const v = version ?? Number((await this.redis.hget(wfKey, 'latest')) ?? 0);
    if (version === undefined && v) this.latest.set(name, { version: v, until: Date.now() + LATEST_CACHE_MS });
    if (!v) return undefined;
    const [json, at] = await this.redis.hmget(wfKey, `v:${v}`, `t:${v}`);
    if (!json) return undefined;
    const parsed = WorkflowDefinitionSchema.safeParse({ ...JSON.parse(json), version: v });
    if (!parsed.success) {
      throw new TriadError(ErrorCode.Internal, `stored workflow ${name} v${v} no longer parses: ${parsed.error.message}`);
    }
    const workflow: RegisteredWorkflow = { ...parsed.data, version: v, registeredAt: Number(at ?? 0) };
    const plan = compilePlan(workflow);
    const c: CompiledWorkflow = { workflow, plan, planJson: JSON.stringify(plan) };
    this.cache.set(`${name}@${v}`, c);
    return c;
  }

  async list(): Promise<WorkflowSummary[]> {
    const namesList = (await this.redis.smembers(this.keys.workflows)).sort();
    const out: WorkflowSummary[] = [];
    for (const name of namesList) {
      const fields = await this.redis.hkeys(this.keys.workflow(name));
      const versions = fields
        .filter((f) => f.startsWith('v:'))
        .map((f) => Number(f.slice(2)))
        .sort((a, b) => a - b);
      const latest = Math.max(0, ...versions);
      const wf = latest ? await this.get(name, latest) : undefined;
      const summary: WorkflowSummary = { name, latest, versions };
      if (wf?.description) summary.description = wf.description;
      out.push(summary);
    }
    return out;
  }
}
