import { readFileSync } from 'node:fs';
import { basename, dirname, isAbsolute, resolve } from 'node:path';
import { hashOf } from '../../core/hashing.js';
import { jsonObjectLine, LineError } from '../../core/jsonl.js';

/**
 * Python versions we have an offline base recipe for; `--base-image` lifts the restriction.
 * 3.9 (bullseye) is for old histories whose tests need what 3.10 removed (`collections.Mapping`).
 */
export const PYTHON_VERSIONS = ['3.9', '3.11', '3.13'] as const;
export type PythonVersion = (typeof PYTHON_VERSIONS)[number];
export const DEFAULT_PYTHON: PythonVersion = '3.11';

/** The Debian suite each Python comes from: base images are built from it and the Debian resolver reads its indexes. */
export const DEBIAN_SUITES = { '3.9': 'bullseye', '3.11': 'bookworm', '3.13': 'trixie' } as const satisfies Record<PythonVersion, string>;
export type DebianSuite = (typeof DEBIAN_SUITES)[PythonVersion];

export interface UnitEnv {
  apt: string[];
  pip: string[];
  setup: string[];
  vars: Record<string, string>;
  pytest_args: string[];
  /** Files from the Python index, installed offline from the host's cache before `setup` (pipeline/envs/index/). */
  lock?: LockedDist[];
}

/** One file of a unit's lock: a line that carries its lock rebuilds the same environment without resolving. */
export interface LockedDist {
  name: string;
  version: string;
  filename: string;
  url: string;
  sha256: string;
  /** A wheel only building an sdist of the lock needs (its build requirements): offered to that build, never installed. */
  build_only?: boolean;
}

const LOCK_KEYS = ['name', 'version', 'filename', 'url', 'sha256'] as const;

function parseLock(value: unknown): LockedDist[] {
  if (!Array.isArray(value)) throw new LineError('"env.lock" must be a list of files');
  return value.map((d: Record<string, unknown>, i) => {
    const where = `env.lock[${i}]`;
    if (!d || typeof d !== 'object' || Object.keys(d).some((k) => !LOCK_KEYS.includes(k as (typeof LOCK_KEYS)[number]) && k !== 'build_only')) {
      throw new LineError(`"${where}" must be an object of ${LOCK_KEYS.join(', ')} (and build_only)`);
    }
    if (!LOCK_KEYS.every((k) => typeof d[k] === 'string' && d[k])) throw new LineError(`"${where}" needs each of ${LOCK_KEYS.join(', ')} as a string`);
    if (!/^[0-9a-f]{64}$/.test(d.sha256 as string)) throw new LineError(`"${where}.sha256" must be 64 hex digits`);
    // The file name becomes a path in the cache and the build's folder.
    if (!/^[A-Za-z0-9][A-Za-z0-9._+!-]*\.(whl|tar\.gz)$/.test(d.filename as string))
      throw new LineError(`"${where}.filename" must be a wheel's or an sdist's file name`);
    if (d.build_only !== undefined && d.build_only !== true) throw new LineError(`"${where}.build_only" must be true where given`);
    return { ...Object.fromEntries(LOCK_KEYS.map((k) => [k, d[k]])), ...(d.build_only ? { build_only: true } : {}) } as unknown as LockedDist;
  });
}

export type SourceKind = 'git-url' | 'local';

/** One repository at one commit: the unit of work of every stage. */
export interface Unit {
  /** Stable, readable, unique: `<slug>-<hash>`; names files, images and ledger entries. */
  id: string;
  slug: string;
  /** 1-based line of the manifest it came from. */
  line: number;
  /** A stable name for rows: the URL as written, or a local path's folder name (never "../cachetools"). */
  repo: string;
  /** Where git fetches from: a URL, or an absolute local path. */
  location: string;
  sourceKind: SourceKind;
  /** Requested commit or ref; undefined means the default branch's head. */
  commit?: string;
  python: PythonVersion;
  /** The line names its Python: a resolver keeps it rather than choosing the base. */
  pythonGiven: boolean;
  env: UnitEnv;
  /** The line has its own `env`: it is used as written (no inference, no install, no repairs). A bare line's is inferred. */
  envGiven: boolean;
  /** For an older commit traced with --commits: the id of the unit at the manifest's commit. */
  historyOf?: string;
}

export interface ManifestError {
  file: string;
  line: number;
  message: string;
}

export interface Manifest {
  file: string;
  units: Unit[];
  errors: ManifestError[];
}

const TOP_KEYS = new Set(['repo', 'commit', 'env', 'python']);
const ENV_KEYS = new Set(['apt', 'pip', 'setup', 'vars', 'pytest_args', 'lock']);

function stringList(value: unknown, where: string): string[] {
  if (value === undefined) return [];
  if (!Array.isArray(value) || !value.every((v) => typeof v === 'string')) {
    throw new LineError(`"${where}" must be a list of strings`);
  }
  return value;
}

function parseEnv(value: unknown): UnitEnv {
  if (value === undefined) return { apt: [], pip: [], setup: [], vars: {}, pytest_args: [] };
  if (!value || typeof value !== 'object' || Array.isArray(value)) throw new LineError('"env" must be an object');
  const raw = value as Record<string, unknown>;
  const unknown = Object.keys(raw).filter((k) => !ENV_KEYS.has(k));
  if (unknown.length) {
    throw new LineError(`unknown key${unknown.length > 1 ? 's' : ''} in "env": ${unknown.join(', ')} (allowed: ${[...ENV_KEYS].join(', ')})`);
  }
  const vars: Record<string, string> = {};
  if (raw.vars !== undefined) {
    if (!raw.vars || typeof raw.vars !== 'object' || Array.isArray(raw.vars)) throw new LineError('"env.vars" must be an object of strings');
    for (const [name, v] of Object.entries(raw.vars as Record<string, unknown>)) {
      if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(name)) throw new LineError(`"env.vars" has an invalid variable name: ${JSON.stringify(name)}`);
      if (typeof v !== 'string') throw new LineError(`"env.vars.${name}" must be a string`);
      vars[name] = v;
    }
  }
  const apt = stringList(raw.apt, 'env.apt');
  for (const pkg of apt) {
    if (!/^[a-z0-9][a-z0-9+.:=~-]*$/.test(pkg)) throw new LineError(`"env.apt" has an invalid Debian package name: ${JSON.stringify(pkg)}`);
  }
  return {
    apt,
    pip: stringList(raw.pip, 'env.pip'),
    setup: stringList(raw.setup, 'env.setup'),
    vars,
    ...(raw.lock === undefined ? {} : { lock: parseLock(raw.lock) }),
    pytest_args: stringList(raw.pytest_args, 'env.pytest_args'),
  };
}

function isUrl(repo: string): boolean {
  return /^[a-z][a-z0-9+.-]*:\/\//i.test(repo) || /^[^/\s]+@[^/\s]+:/.test(repo);
}

/** A readable name: `owner__name` for hosted URLs, the folder name for local paths. */
export function slugFor(location: string, kind: SourceKind): string {
  const trimmed = location.replace(/\/+$/, '').replace(/\.git$/, '');
  let parts: string[];
  if (kind === 'git-url' && !trimmed.startsWith('file://')) {
    parts = trimmed
      .replace(/^[a-z][a-z0-9+.-]*:\/\/[^/]+\//i, '')
      .replace(/^[^@]+@[^:]+:/, '')
      .split('/')
      .filter(Boolean)
      .slice(-2);
  } else {
    parts = [basename(trimmed.replace(/^file:\/\//, ''))];
  }
  const slug = parts
    .join('__')
    .toLowerCase()
    .replace(/[^a-z0-9._-]+/g, '-')
    .replace(/^[-.]+|[-.]+$/g, '');
  return slug || 'repo';
}

function parseLine(text: string, line: number, baseDir: string): Unit {
  const obj = jsonObjectLine(text);
  const unknown = Object.keys(obj).filter((k) => !TOP_KEYS.has(k));
  if (unknown.length) {
    throw new LineError(`unknown key${unknown.length > 1 ? 's' : ''}: ${unknown.join(', ')} (allowed: ${[...TOP_KEYS].join(', ')})`);
  }
  if (typeof obj.repo !== 'string' || !obj.repo.trim()) throw new LineError('"repo" is required: a git URL, a file:// URL or a local path');
  if (obj.commit !== undefined && (typeof obj.commit !== 'string' || !/^[\w./@^~-]+$/.test(obj.commit) || obj.commit.startsWith('-'))) {
    throw new LineError('"commit" must be a commit SHA or a ref name');
  }
  if (obj.python !== undefined && !PYTHON_VERSIONS.includes(obj.python as PythonVersion)) {
    throw new LineError(`"python" must be one of ${PYTHON_VERSIONS.join(', ')} (got ${JSON.stringify(obj.python)})`);
  }
  const repo = obj.repo.trim();
  const sourceKind: SourceKind = isUrl(repo) ? 'git-url' : 'local';
  const location = sourceKind === 'local' ? (isAbsolute(repo) ? repo : resolve(baseDir, repo)) : repo;
  const python = (obj.python as PythonVersion | undefined) ?? DEFAULT_PYTHON;
  const commit = obj.commit as string | undefined;
  const slug = slugFor(location, sourceKind);
  return {
    id: `${slug}-${hashOf({ location, commit: commit ?? null, python }, 8)}`,
    slug,
    line,
    repo: sourceKind === 'local' ? basename(location.replace(/\/+$/, '')) : repo,
    location,
    sourceKind,
    commit,
    python,
    pythonGiven: obj.python !== undefined,
    env: parseEnv(obj.env),
    envGiven: obj.env !== undefined,
  };
}

/** Parses JSON Lines; a bad line is an error with its line number and the other lines go on. */
export function parseManifest(text: string, file: string): Manifest {
  const baseDir = dirname(resolve(file));
  const units: Unit[] = [];
  const errors: ManifestError[] = [];
  const seen = new Map<string, number>();
  text.split('\n').forEach((rawLine, i) => {
    const line = i + 1;
    const content = rawLine.trim();
    if (!content || content.startsWith('#')) return;
    try {
      const unit = parseLine(content, line, baseDir);
      const first = seen.get(unit.id);
      if (first !== undefined) throw new LineError(`duplicate of line ${first} (same repository, commit and python)`);
      seen.set(unit.id, line);
      units.push(unit);
    } catch (e) {
      if (!(e instanceof LineError)) throw e;
      errors.push({ file, line, message: e.message });
    }
  });
  return { file, units, errors };
}

/** The manifest file itself cannot be used: a usage error, not a unit failure. */
export class ManifestUnreadable extends Error {}

export function readManifest(file: string): Manifest {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (e) {
    throw new ManifestUnreadable(`cannot read manifest ${file}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`);
  }
  const manifest = parseManifest(text, file);
  if (!manifest.units.length && !manifest.errors.length)
    throw new ManifestUnreadable(`manifest ${file} names no repository: write one JSON object a line, e.g. {"repo": "https://github.com/owner/name"}`);
  return manifest;
}
