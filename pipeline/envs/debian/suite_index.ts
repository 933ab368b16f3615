/**
 * What the Debian resolver knows about one suite, reduced from the mirror's own data and cached
 * under cacheDir()/debian/<suite>/:
 *  - dh-python's PyPI-to-Debian mapping (`/usr/share/dh-python/dist/cpython3_fallback` in that
 *    suite's dh-python package: the map Debian's packaging tools themselves use);
 *  - the binary Packages index: every package's version, who Provides a virtual name, the
 *    python3-* packages each python3-* package Depends on, and which of them are compiled
 *    (Architecture: any);
 *  - the Contents indexes (all + amd64), kept only for usr/lib/python3*: the dist-info/egg-info
 *    names each package installs (with their upstream versions) and the import names it ships.
 * The reduced form is keyed by FORMAT and the SHA256 of the files it was read from; that key
 * (`hash`) is part of every resolution's key. A cached index is used as it is, with no network,
 * until a caller asks to `refresh` it: then InRelease is read again and, when it lists other files
 * than the cached index was built for, the suite is reduced again.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { writeFileAtomic } from '../../../core/atomic.js';
import { hashOf } from '../../../core/hashing.js';
import { withLock } from '../../../core/lock.js';
import { cacheDir } from '../../runtime/layout.js';
import type { DebianSuite } from '../../runtime/manifest.js';
import { normalizeName } from '../requirements/names.js';
import { formatVersion } from '../requirements/pep440.js';
import { debFileText, type Fetched, fetchGzipText, fetchRelease, type Release, streamGzipLines } from './mirror.js';
import { debianUpstreamVersion } from './version.js';

/** Bump when the reduction below changes: cached indexes of another format are rebuilt. */
const FORMAT = 3;

const PACKAGES = 'main/binary-amd64/Packages.gz';
const CONTENTS = ['main/Contents-all.gz', 'main/Contents-amd64.gz'];
const DH_PYTHON_MAP = 'usr/share/dh-python/dist/cpython3_fallback';
const DIST_PACKAGES = 'usr/lib/python3/dist-packages/';
/** The interpreter's own folder (usr/lib/python3.11/): stdlib modules Debian splits out (distutils, lib2to3, tkinter). */
const STDLIB = /^usr\/lib\/python3\.\d+\//;

export interface DebianIndex {
  suite: DebianSuite;
  /** Key of the mirror data and of this reduction. */
  hash: string;
  /** InRelease's Date. */
  date: string;
  /** Index files the mirror served other than InRelease lists them (read anyway: see debian_mirror.ts). */
  unlisted: string[];
  /** The suite's python3, upstream version ("3.11.2"). */
  python: string;
  /** Normalised distribution name -> binary package ("python3" where the stdlib has it). */
  dhPython: Map<string, string>;
  /** Normalised dist-info/egg-info name -> [package, upstream version as the folder names it]. */
  distInfo: Map<string, [string, string][]>;
  /** Import name -> packages shipping it: every top-level name, and `top.sub` below a top several packages share (namespace packages). */
  modules: Map<string, string[]>;
  /** Binary package -> Debian version. */
  packages: Map<string, string>;
  /** Virtual python3-* package -> the packages that Provide it. */
  provides: Map<string, string[]>;
  /**
   * Every python3-* package -> the python3-* packages it Depends on, every alternative named: the
   * versions it was made and tested with (python3-fastapi with python3-starlette; a compiled one's
   * extension modules are built against them, python3-torchvision against python3-torch), which a
   * wheel of the same project on the path would not match.
   */
  pythonDepends: Map<string, string[]>;
  /** The python3-* packages that are compiled (Architecture: any). */
  compiled: Set<string>;
}

/** The cached file: sorted entry lists, so equal data is an equal file. */
interface Stored {
  format: number;
  suite: DebianSuite;
  hash: string;
  /** Key of the InRelease sums it was built for: a refresh with the same sums keeps it. */
  release: string;
  date: string;
  unlisted: string[];
  python: string;
  dhPython: [string, string][];
  distInfo: [string, [string, string][]][];
  modules: [string, string[]][];
  packages: [string, string][];
  provides: [string, string[]][];
  pythonDepends: [string, string[]][];
  compiled: string[];
}

const suiteDir = (suite: DebianSuite) => join(cacheDir(), 'debian', suite);
const indexFile = (suite: DebianSuite, hash: string) => join(suiteDir(suite), `index-${hash}.json`);
/** Names the index last built or refreshed: what a plain load uses. */
const currentFile = (suite: DebianSuite) => join(suiteDir(suite), 'current.json');

interface Current {
  hash: string;
  release: string;
}

const releaseKey = (release: Release) => hashOf({ format: FORMAT, files: [PACKAGES, ...CONTENTS].map((f) => [f, release.sha256.get(f) ?? null]) }, 16);

interface PackagesData {
  packages: Map<string, string>;
  provides: Map<string, Set<string>>;
  pythonDepends: Map<string, string[]>;
  compiled: Set<string>;
  dhPython?: { filename: string; sha256: string };
}

const FIELDS = Object.fromEntries(
  ['Package', 'Version', 'Provides', 'Filename', 'SHA256', 'Architecture', 'Depends'].map((f) => [f, new RegExp(`^${f}: (.*)$`, 'm')]),
);

function parsePackages(text: string): PackagesData {
  const packages = new Map<string, string>();
  const provides = new Map<string, Set<string>>();
  const pythonDepends = new Map<string, string[]>();
  const compiled = new Set<string>();
  let dhPython: PackagesData['dhPython'];
  for (const stanza of text.split('\n\n')) {
    const field = (name: string) => FIELDS[name].exec(stanza)?.[1];
    const name = field('Package');
    const version = field('Version');
    if (!name || !version) continue;
    packages.set(name, version);
    for (const virtual of (field('Provides') ?? '').split(',')) {
      const v = virtual.trim().split(/[\s(]/)[0];
      if (v.startsWith('python3-')) provides.set(v, (provides.get(v) ?? new Set()).add(name));
    }
    if (name.startsWith('python3-')) {
      // "python3-torch (>= 2.6), python3-numpy | python3-numpy-abi9": every alternative's name.
      const on = (field('Depends') ?? '').split(/[,|]/).map((d) => d.trim().split(/[\s(:]/)[0]);
      const deps = [...new Set(on.filter((d) => d.startsWith('python3-') && d !== name))];
      if (deps.length) pythonDepends.set(name, deps);
      if (field('Architecture') !== 'all') compiled.add(name);
    }
    if (name === 'dh-python') dhPython = { filename: field('Filename')!, sha256: field('SHA256')! };
  }
  return { packages, provides, pythonDepends, compiled, dhPython };
}

function parseDhPython(text: string): Map<string, string> {
  const map = new Map<string, string>();
  for (const line of text.split('\n')) {
    // "PyYAML python3-yaml", or "argparse python3 (>= 3.2)": the second word is the package.
    const [dist, pkg] = line.trim().split(/\s+/);
    if (dist && pkg && !dist.startsWith('#')) map.set(normalizeName(dist), pkg);
  }
  return map;
}

/** Debug builds and CPython's own test suite ship copies of modules no project asks for by them. */
const DEBUG_ONLY = /-dbg$|-testsuite$/;

const IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** "yaml.py" -> yaml, "_yaml.cpython-311-x86_64-linux-gnu.so" -> _yaml, "pkg" (a folder) -> pkg. */
function moduleName(entry: string, isFolder: boolean): string | undefined {
  const name = isFolder ? entry : /^([^.]+)\.(?:py|(?:[^/]*\.)?so)$/.exec(entry)?.[1];
  return name && IDENTIFIER.test(name) && name !== '__init__' && name !== '__pycache__' ? name : undefined;
}

/** "Flask_Cors-3.0.10.dist-info", "foo-1.0-py3.11.egg-info", "bar.egg-info" -> [name, version]. */
function distInfoName(entry: string): [string, string] | undefined {
  const m = /^([^-]+?)(?:-([^-]+?))?(?:-py\d[\d.]*)?\.(?:dist|egg)-info$/.exec(entry);
  return m ? [normalizeName(m[1]), m[2] ?? ''] : undefined;
}

class ContentsReducer {
  readonly distInfo = new Map<string, Map<string, string>>();
  readonly modules = new Map<string, Set<string>>();
  /** top -> sub -> packages: kept for the tops several packages share. */
  private readonly below = new Map<string, Map<string, Set<string>>>();

  line(line: string): void {
    const cut = line.search(/\s+\S+$/);
    if (cut < 0) return;
    const path = line.slice(0, cut);
    const owners = line
      .slice(cut)
      .trim()
      .split(',')
      .map((q) => q.slice(q.lastIndexOf('/') + 1))
      .filter((pkg) => !DEBUG_ONLY.test(pkg));
    if (!owners.length) return;
    const stdlib = STDLIB.exec(path);
    const rel = path.startsWith(DIST_PACKAGES) ? path.slice(DIST_PACKAGES.length) : stdlib ? path.slice(stdlib[0].length) : undefined;
    if (rel === undefined) return;
    const parts = rel.split('/');
    if (stdlib) {
      if (['dist-packages', 'site-packages', 'test', 'idlelib'].includes(parts[0]) || parts[0].startsWith('config-')) return;
      if (parts[0] === 'lib-dynload') parts.shift();
    } else {
      const dist = distInfoName(parts[0]);
      if (dist) {
        for (const pkg of owners) {
          const versions = this.distInfo.get(dist[0]) ?? new Map<string, string>();
          versions.set(pkg, dist[1]);
          this.distInfo.set(dist[0], versions);
        }
        return;
      }
    }
    const top = moduleName(parts[0], parts.length > 1);
    if (!top) return;
    for (const pkg of owners) this.modules.set(top, (this.modules.get(top) ?? new Set()).add(pkg));
    const sub = !stdlib && parts.length > 1 ? moduleName(parts[1], parts.length > 2) : undefined;
    if (!sub) return;
    const subs = this.below.get(top) ?? new Map<string, Set<string>>();
    this.below.set(top, subs);
    for (const pkg of owners) subs.set(sub, (subs.get(sub) ?? new Set()).add(pkg));
  }

  /** Import names with their packages, `top.sub` only below shared tops. */
  importNames(): Map<string, Set<string>> {
    const out = new Map(this.modules);
    for (const [top, subs] of this.below) {
      if ((this.modules.get(top)?.size ?? 0) < 2) continue;
      for (const [sub, pkgs] of subs) out.set(`${top}.${sub}`, pkgs);
    }
    return out;
  }
}

const sortedEntries = <V>(map: Map<string, V>): [string, V][] => [...map].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
const sortedList = (values: Iterable<string>) => [...values].sort();

async function build(suite: DebianSuite, release: Release): Promise<Stored> {
  const read = new Map<string, Fetched>();
  const packagesFile = await fetchGzipText(release, PACKAGES);
  read.set(PACKAGES, packagesFile.fetched);
  const data = parsePackages(packagesFile.text);
  if (!data.dhPython) throw new Error(`Debian ${suite} has no dh-python package: no PyPI-to-Debian map`);
  const dhPython = parseDhPython(await debFileText(data.dhPython.filename, data.dhPython.sha256, DH_PYTHON_MAP, suiteDir(suite)));
  const contents = new ContentsReducer();
  for (const file of CONTENTS) read.set(file, await streamGzipLines(release, file, [DIST_PACKAGES, 'usr/lib/python3.'], (line) => contents.line(line)));
  const python = debianUpstreamVersion(data.packages.get('python3') ?? '');
  if (!python) throw new Error(`Debian ${suite} has no python3 package`);
  return {
    format: FORMAT,
    suite,
    hash: hashOf({ format: FORMAT, suite, files: sortedEntries(read).map(([f, r]) => [f, r.sha256]) }, 16),
    release: releaseKey(release),
    date: release.date,
    unlisted: sortedEntries(read)
      .filter(([, r]) => !r.listed)
      .map(([f]) => f),
    python: formatVersion(python),
    dhPython: sortedEntries(dhPython),
    distInfo: sortedEntries(contents.distInfo).map(([name, versions]) => [name, sortedEntries(versions)]),
    modules: sortedEntries(contents.importNames()).map(([name, pkgs]) => [name, sortedList(pkgs)]),
    packages: sortedEntries(data.packages),
    provides: sortedEntries(data.provides).map(([name, pkgs]) => [name, sortedList(pkgs)]),
    pythonDepends: sortedEntries(data.pythonDepends).map(([name, pkgs]) => [name, sortedList(pkgs)]),
    compiled: sortedList(data.compiled),
  };
}

function fromStored(s: Stored): DebianIndex {
  return {
    suite: s.suite,
    hash: s.hash,
    date: s.date,
    unlisted: s.unlisted,
    python: s.python,
    dhPython: new Map(s.dhPython),
    distInfo: new Map(s.distInfo),
    modules: new Map(s.modules),
    packages: new Map(s.packages),
    provides: new Map(s.provides),
    pythonDepends: new Map(s.pythonDepends),
    compiled: new Set(s.compiled),
  };
}

function readCurrent(suite: DebianSuite): Current | undefined {
  if (!existsSync(currentFile(suite))) return undefined;
  const current = JSON.parse(readFileSync(currentFile(suite), 'utf8')) as Current;
  return existsSync(indexFile(suite, current.hash)) ? current : undefined;
}

function readIndex(suite: DebianSuite, hash: string): DebianIndex | undefined {
  const stored = JSON.parse(readFileSync(indexFile(suite, hash), 'utf8')) as Stored;
  return stored.format === FORMAT ? fromStored(stored) : undefined;
}

const loaded = new Map<DebianSuite, Promise<DebianIndex>>();

/**
 * The suite's index: the cached one when there is one (no network), else built from the mirror
 * (WORLDLINE_DEBIAN_MIRROR) under a lock, so concurrent runs download it once. `refresh` reads
 * InRelease again and rebuilds when the suite changed.
 */
export function loadDebianIndex(suite: DebianSuite, opts: { refresh?: boolean } = {}): Promise<DebianIndex> {
  const known = loaded.get(suite);
  if (known && !opts.refresh) return known;
  const load = withLock(join(cacheDir(), 'locks', `debian-${suite}`), async () => {
    const current = readCurrent(suite);
    const cached = current && !opts.refresh ? readIndex(suite, current.hash) : undefined;
    if (cached) return cached;
    const release = await fetchRelease(suite);
    const kept = current?.release === releaseKey(release) ? readIndex(suite, current.hash) : undefined;
    if (kept) return kept;
    const stored = await build(suite, release);
    writeFileAtomic(indexFile(suite, stored.hash), JSON.stringify(stored));
    writeFileAtomic(currentFile(suite), JSON.stringify({ hash: stored.hash, release: stored.release } satisfies Current));
    return fromStored(stored);
  });
  loaded.set(suite, load);
  load.catch(() => loaded.delete(suite));
  return load;
}
