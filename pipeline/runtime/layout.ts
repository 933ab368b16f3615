/**
 * The one owner of every path Worldline writes: the output folder's layout (ledger, checkouts,
 * per-unit part files, logs, scratch work folders, the dataset) and the machine-wide cache that
 * outlives one output folder (mirrors, downloaded packages, base image roots). Nothing else spells
 * a folder name under `out/`, so moving one is a change here alone (datatrove's DataFolder).
 */
import { join } from 'node:path';
import { hashOf } from '../../core/hashing.js';
import type { Unit } from './manifest.js';

/** Downloaded packages, bare mirrors of repositories, base image work folders. */
export function cacheDir(): string {
  return process.env.WORLDLINE_CACHE ?? '/var/cache/worldline';
}

/** A host-wide lock (core/lock.ts) on a machine-wide resource: a base image, an engine's build network. */
export function machineLock(name: string): string {
  return join(cacheDir(), 'locks', name);
}

/**
 * The Python index's side of the cache, one per host and shared by every build: the resolver's
 * binary, its metadata cache, and each downloaded file by content (pipeline/envs/index/).
 * WORLDLINE_INDEX_CACHE moves it (tests count their own downloads).
 */
export function indexCacheDir(): string {
  return process.env.WORLDLINE_INDEX_CACHE ?? join(cacheDir(), 'index');
}

/** The Debian mirror base images, env images and the Debian resolver's indexes come from. */
export function debianMirror(): string {
  return process.env.WORLDLINE_DEBIAN_MIRROR ?? 'http://deb.debian.org/debian';
}

/** Bare mirrors, one per repository location; WORLDLINE_MIRRORS moves them (tests use a scratch folder). */
export function mirrorsDir(): string {
  return process.env.WORLDLINE_MIRRORS ?? join(cacheDir(), 'mirrors');
}

/** A repository's bare mirror: named for people, keyed by location so two forks never share one. */
export function mirrorPath(unit: Unit): string {
  return join(mirrorsDir(), `${unit.slug}-${hashOf(unit.location, 10)}.git`);
}

/**
 * What an environment image's build printed (redacted), by its tag: an image reused from another
 * output folder's build still tells the repair loop how its collect-only run ended.
 */
export function buildOutputPath(tag: string): string {
  return join(cacheDir(), 'builds', `${tag.replace(/[^A-Za-z0-9._-]+/g, '_')}.log`);
}

/** Per-unit JSON Lines written by a stage and read by `shard`, one file per unit and kind. */
export type PartKind = 'tests' | 'traces' | 'tasks' | 'trajectories' | 'task_traces' | 'trace_descriptions';

/** Scratch folders, one per (purpose, unit): removed by their writers, never read by `shard`. */
export const WORK_KINDS = ['build', 'validate', 'trace', 'forage', 'grade', 'issues', 'task-traces', 'serve'] as const;
export type WorkKind = (typeof WORK_KINDS)[number];

/** Paths under one output folder. */
export const outLayout = {
  ledger: (out: string) => join(out, 'ledger'),
  ledgerDir: (out: string, stage: string) => join(out, 'ledger', stage),
  ledgerEntry: (out: string, stage: string, unitId: string) => join(out, 'ledger', stage, `${unitId}.json`),
  manifestErrors: (out: string) => join(out, 'ledger', 'manifest-errors.json'),
  /** Relative to the output folder, as clone records it. */
  checkoutRel: (unitId: string) => join('checkouts', unitId),
  checkout: (out: string, unitId: string) => join(out, 'checkouts', unitId),
  part: (out: string, kind: PartKind, unitId: string) => join(out, 'parts', kind, `${unitId}.jsonl`),
  partsRoot: (out: string) => join(out, 'parts'),
  logDir: (out: string, stage: string) => join(out, 'logs', stage),
  log: (out: string, stage: string, unitId: string) => join(out, 'logs', stage, `${unitId}.log`),
  work: (out: string, kind: WorkKind, unitId: string, ...sub: string[]) => join(out, 'work', kind, unitId, ...sub),
  /** `worldline serve`'s episodes, one trajectory row (a JSON Lines file) each. */
  served: (out: string, episodeId: string) => join(out, 'served', 'trajectories', `${episodeId}.jsonl`),
  workRoot: (out: string) => join(out, 'work'),
  /** A stage's finished pieces of one unit, kept until the stage finishes so a cut run goes on from them. */
  progress: (out: string, stage: string, unitId: string) => join(out, 'progress', stage, unitId),
  progressRoot: (out: string) => join(out, 'progress'),
  /** The published dataset: a symlink the dataset writer swaps to a complete version beside it. */
  dataset: (out: string) => join(out, 'dataset'),
  datasetManifest: (out: string) => join(out, 'dataset', 'manifest.json'),
};
