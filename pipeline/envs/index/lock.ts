/**
 * A unit's lock: the whole tree of what the index must give, resolved at once by uv (`uv pip
 * compile`) for the target base's Python and glibc without its interpreter, as of a cut-off
 * (`--exclude-newer`, the commit's date: ranges resolve to what was current then), wheels only
 * (nothing runs at resolve, and the build installs offline), written as PEP 751's pylock.toml and
 * read back as one file per distribution with its URL and sha256. Measured against pip's
 * `install --dry-run --report` on the same eight requirements (docs/environments.md): uv took
 * 0.45 s, pip 6.0 s, and only uv resolves for another Python and platform with an upload cut-off.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { parse } from 'smol-toml';
import { indexCacheDir } from '../../runtime/layout.js';
import type { LockedDist, PythonVersion } from '../../runtime/manifest.js';
import { normalizeName } from '../requirements/names.js';
import { compareVersions, formatSpecifiers, parseVersion, type Specifier, type Version } from '../requirements/pep440.js';
import { parseRequirement } from '../requirements/pep508.js';
import { type Sdist, sdistAtCutoff } from './sdist.js';
import type { IndexSettings } from './settings.js';

/** Each base's glibc, as uv names a target platform (trixie's 2.41 is newer than uv knows: 2.40 is the nearest below). */
const PLATFORMS: Record<PythonVersion, string> = {
  '3.9': 'x86_64-manylinux_2_31',
  '3.11': 'x86_64-manylinux_2_36',
  '3.13': 'x86_64-manylinux_2_40',
};

/** A resolve gets this long, and each request this many tries: then the unit fails with the cause, never hangs. */
const RESOLVE_TIMEOUT_MS = 300_000;
const HTTP_TIMEOUT_S = 60;
const HTTP_RETRIES = 3;

/** A date or time as uv's `--exclude-newer` takes it (UTC, whole seconds); throws on what is no date. */
export function cutoffTime(value: string): string {
  const t = new Date(value);
  if (Number.isNaN(t.getTime())) throw new Error(`not a date: ${JSON.stringify(value)}`);
  return t.toISOString().replace(/\.\d{3}Z$/, 'Z');
}

/** The flags and variables that give uv what `settings` give pip. */
function uvIndexArgs(settings: IndexSettings): { args: string[]; env: Record<string, string> } {
  const args = [
    ...(settings.noIndex ? ['--no-index'] : settings.indexUrl ? ['--index-url', settings.indexUrl] : []),
    ...(settings.noIndex ? [] : settings.extraIndexUrls.flatMap((u) => ['--extra-index-url', u])),
    ...settings.findLinks.flatMap((f) => ['--find-links', f]),
    ...settings.constraints.flatMap((c) => ['--constraint', c]),
    // pip takes the best version across every index; uv's default stops at the first index that has the name.
    '--index-strategy',
    'unsafe-best-match',
  ];
  const env: Record<string, string> = {
    UV_HTTP_TIMEOUT: String(HTTP_TIMEOUT_S),
    UV_HTTP_RETRIES: String(HTTP_RETRIES),
    ...(settings.cert ? { SSL_CERT_FILE: settings.cert } : {}),
    ...(settings.proxy ? { HTTPS_PROXY: settings.proxy, HTTP_PROXY: settings.proxy } : {}),
  };
  return { args, env };
}

/**
 * The cause a failed resolve names: uv's innermost cause (an unknown certificate issuer, a refused
 * connection; `Caused by:` on a terminal, `cause:` otherwise) with its first error line, never only
 * the last symptom.
 */
export function uvCause(stderr: string): string {
  const lines = stderr
    .split('\n')
    .map((l) => l.trim())
    .filter(Boolean);
  const causes = lines.filter((l) => /^(Caused by|cause):/.test(l)).map((l) => l.replace(/^(Caused by|cause):\s*/, ''));
  const first = lines.find((l) => /^error:/.test(l))?.replace(/^error:\s*/, '');
  if (!causes.length) return first ?? lines.at(-1) ?? 'uv said nothing';
  return `${causes.at(-1)}${first ? ` (${first})` : ''}`;
}

interface PylockFile {
  name?: string;
  url?: string;
  path?: string;
  hashes?: { sha256?: string };
}

/**
 * Whether a locked file may be fetched: anything over HTTP(S), and a local file only inside a
 * folder the index settings name (find-links, a file:// index). A project's own `name @
 * file:///...` requirement would otherwise copy a file of this host into the cache and the image.
 */
function fromTheIndex(url: string, settings: IndexSettings): boolean {
  if (/^https?:\/\//i.test(url)) return true;
  const local = (r: string) => resolve(r.startsWith('file:') ? fileURLToPath(r) : r);
  const isLocal = (r: string | null): r is string => !!r && (r.startsWith('file:') || !/^[a-z][a-z0-9+.-]*:/i.test(r));
  const roots = [
    // A file index's pages link beside it (/opt/pypi/simple/x/ -> /opt/pypi/files/): its parent is its folder.
    ...[settings.indexUrl, ...settings.extraIndexUrls].filter(isLocal).map((r) => dirname(local(r))),
    ...settings.findLinks.filter(isLocal).map(local),
  ];
  return roots.some((root) => local(url).startsWith(`${root.replace(/\/+$/, '')}/`));
}

/**
 * The files of a pylock.toml uv wrote: per package, its first wheel (uv listed only those the
 * target can install); a package with no wheel, or a wheel with no sha256 (a direct reference),
 * is the failure.
 */
function readPylock(text: string, settings: IndexSettings): { lock: LockedDist[] } | { failure: string } {
  const doc = parse(text) as { packages?: { name: string; version: string; wheels?: PylockFile[]; archive?: PylockFile }[] };
  const lock: LockedDist[] = [];
  for (const p of doc.packages ?? []) {
    // `archive`: a direct reference (`name @ URL`), locked like an index's wheel when it is one.
    const wheel = p.wheels?.[0] ?? p.archive;
    const location = wheel?.url ?? wheel?.path;
    const filename = wheel?.name ?? decodeURIComponent(location?.split('/').at(-1)?.split('#')[0] ?? '');
    if (!wheel || !location || !filename.endsWith('.whl')) return { failure: `no wheel of ${p.name} ${p.version} in the lock` };
    if (!fromTheIndex(location, settings)) return { failure: `${p.name} would come from ${location}, a file of this host outside the index's folders` };
    if (!wheel.hashes?.sha256) return { failure: `${p.name} ${p.version}: its wheel has no sha256 in the lock` };
    lock.push({ name: p.name, version: p.version, filename, url: location, sha256: wheel.hashes.sha256 });
  }
  return { lock };
}

/** The project uv says the index does not have at all (a mirror that holds part of the index). */
const notOnTheIndex = (said: string): string | undefined =>
  /Because (?:([A-Za-z0-9][A-Za-z0-9._-]*) was not found in the package registry|there are no versions of ([A-Za-z0-9][A-Za-z0-9._-]*) and )/
    .exec(said)
    ?.slice(1)
    .find(Boolean);

/**
 * The distribution uv says the index cannot give the target: no wheel for it (`Because [all
 * versions of] X[==V] has no usable wheels`), or no such project at all.
 */
export function wheelless(said: string): string | undefined {
  return (
    /Because (?:all versions of |there is no version of )?([A-Za-z0-9][A-Za-z0-9._-]*)(?:[=<>!~]=?\S+)? ha(?:s|ve) no usable wheels/.exec(said)?.[1] ??
    notOnTheIndex(said)
  );
}

/** The lowest version a requirement's specifiers admit from below (0 where none bounds it). */
function lowerBound(specs: Specifier[]): Version {
  const bounds = specs.filter((s) => ['>=', '>', '==', '~=', '==='].includes(s.op) && !s.version.includes('*'));
  const versions = bounds.flatMap((s) => {
    try {
      return [parseVersion(s.version)];
    } catch {
      return [];
    }
  });
  return versions.sort((a, b) => compareVersions(b, a))[0] ?? parseVersion('0');
}

/**
 * The requirement line to drop when uv says two the project asks for cannot hold together
 * (`Because you require anyio>=3.4.0,<4.0 and anyio>=4.0.0,<5.0, ... unsatisfiable`): branches of
 * a CI matrix the evidence reader cannot choose between, two ranges (asyncer installs anyio 3 in
 * one job and 4 in another) or two exact pins (skorch's `if torch < 2.7: pip install
 * "triton==3.2" elif ...: "triton==3.4"`). The older branch goes: the newest stack's, nearest what
 * a cut-off resolves the rest to, stays. Undefined when the message is another or names no line of
 * `requirements` (a line with markers is the project's own choice, never dropped).
 */
export function olderBranch(failure: string, requirements: string[]): string | undefined {
  const m = /Because you require (\S+) and (\S+), we can conclude that your requirements are unsatisfiable/.exec(failure);
  if (!m) return undefined;
  const said = [m[1], m[2]].map((r) => parseRequirement(r.replace(/[.,]$/, '')));
  if (said[0].key !== said[1].key) return undefined;
  const older = compareVersions(lowerBound(said[0].specifiers), lowerBound(said[1].specifiers)) <= 0 ? said[0] : said[1];
  const same = (a: Specifier[], b: Specifier[]) => formatSpecifiers(a) === formatSpecifiers(b);
  return requirements.find((line) => {
    try {
      const req = parseRequirement(line);
      return req.key === older.key && !req.marker && same(req.specifiers, older.specifiers);
    } catch {
      return false;
    }
  });
}

/**
 * Locks `requirements` as lockOnce does; a distribution with no wheel at the cut-off (an sdist-only
 * test plugin, a small helper deep in the tree: transformer-lens needs transformers-stream-generator)
 * is taken as its sdist (sdist.ts: its dependencies join the tree, its build requirements are
 * locked as build-only files; uv builds it in the build container, never on the host), or, where
 * it has none at the cut-off or its tree does not lock, excluded from the resolution and the rest
 * locked again, at most `MAX_LEFT_OUT` times: the tests that import it fail alone instead of the
 * whole unit. What was left out, and what comes from an sdist, are returned for the record.
 */
export async function lockRequirements(
  opts: Omit<Parameters<typeof lockOnce>[0], 'excludes'>,
): Promise<({ lock: LockedDist[] } | { failure: string; unsolvable: boolean }) & { leftOut: string[]; excluded: string[]; fromSdist: string[] }> {
  const excludes: { name: string; why: string }[] = [];
  const sdists: { name: string; sdist: Sdist; build: LockedDist[] }[] = [];
  const asked = [...opts.requirements];
  // Requirement lines left out as the older of two branches that cannot hold together.
  const dropped: string[] = [];
  for (;;) {
    const requirements = [...asked, ...sdists.flatMap((s) => s.sdist.requires)];
    const locked = await lockOnce({ ...opts, requirements, excludes: [...excludes, ...sdists].map((e) => e.name) });
    const result = () => ({
      ...('lock' in locked ? { lock: [...locked.lock, ...sdistFiles(locked.lock, sdists)] } : locked),
      leftOut: [...excludes.map((e) => `${e.name}: ${e.why}`), ...dropped.map((r) => `${r}: the older branch of a requirement asked for twice`)],
      excluded: excludes.map((e) => e.name),
      fromSdist: sdists.map((s) => `${s.name} ${s.sdist.dist.version}`),
    });
    // Each way of setting a requirement aside counts against one budget: then the lock fails instead.
    const spent = excludes.length + sdists.length + dropped.length >= MAX_LEFT_OUT;
    const branch = 'failure' in locked && !spent ? olderBranch(locked.failure, asked) : undefined;
    if (branch) {
      asked.splice(asked.indexOf(branch), 1);
      dropped.push(branch);
      continue;
    }
    if ('failure' in locked && sdists.length && !wheelless(locked.failure)) {
      // The last sdist's dependencies do not lock with the tree: it is left out as a wheel-less one was.
      const last = sdists.pop()!;
      excludes.push({ name: last.name, why: `no wheel at the cut-off, and its sdist's dependencies do not lock (${locked.failure})` });
      continue;
    }
    const said = 'lock' in locked || spent ? undefined : wheelless(locked.failure);
    const name = said && normalizeName(said);
    if (!name || [...excludes, ...sdists].some((e) => e.name === name)) return result();
    if (notOnTheIndex((locked as { failure: string }).failure)) {
      excludes.push({ name, why: 'not on the index at the cut-off' });
      continue;
    }
    const sdist = await sdistAtCutoff(name, requirements, opts.settings, opts.excludeNewer);
    const build = 'dist' in sdist && sdist.buildRequires.length ? await lockOnce({ ...opts, requirements: sdist.buildRequires, excludes: [] }) : { lock: [] };
    if ('dist' in sdist && 'lock' in build) sdists.push({ name, sdist, build: build.lock });
    else
      excludes.push({
        name,
        why: `no wheel at the cut-off (${'failure' in sdist ? sdist.failure : `its build requirements: ${(build as { failure: string }).failure}`})`,
      });
  }
}

/** The sdists' files and their build requirements' (build-only) for a lock: each file once, a wheel the lock has already not again. */
function sdistFiles(lock: LockedDist[], sdists: { sdist: Sdist; build: LockedDist[] }[]): LockedDist[] {
  const have = new Set(lock.map((d) => d.filename));
  const out: LockedDist[] = [];
  for (const d of sdists.flatMap((s) => [s.sdist.dist, ...s.build.map((b) => ({ ...b, build_only: true }))])) {
    if (!have.has(d.filename)) out.push(d);
    have.add(d.filename);
  }
  return out;
}

/** How many wheel-less distributions one lock may leave out or take as sdists before it fails instead. */
const MAX_LEFT_OUT = 5;

/**
 * Locks `requirements` for `python`'s base as of `excludeNewer` (an RFC 3339 time): the files, or
 * why not (`unsolvable`: no versions meet the requirements there; another Python may).
 */
async function lockOnce(opts: {
  uv: string;
  settings: IndexSettings;
  requirements: string[];
  /** Distributions left out of the resolution, even where something in the tree asks for them. */
  excludes: string[];
  python: PythonVersion;
  excludeNewer: string;
}): Promise<{ lock: LockedDist[] } | { failure: string; unsolvable: boolean }> {
  const work = mkdtempSync(join(tmpdir(), 'worldline-lock-'));
  try {
    writeFileSync(join(work, 'requirements.in'), `${opts.requirements.join('\n')}\n`);
    writeFileSync(join(work, 'excludes.txt'), opts.excludes.map((name) => `${name}\n`).join(''));
    const { args, env } = uvIndexArgs(opts.settings);
    const flags = [
      ...['pip', 'compile', join(work, 'requirements.in'), '--output-file', join(work, 'pylock.toml'), '--format', 'pylock.toml'],
      ...['--python-version', opts.python, '--python-platform', PLATFORMS[opts.python], '--exclude-newer', opts.excludeNewer],
      ...['--only-binary', ':all:', '--no-header', '--no-annotate', '--quiet', '--no-config', '--no-progress'],
      ...['--cache-dir', join(indexCacheDir(), 'uv-cache')],
      ...(opts.excludes.length ? ['--excludes', join(work, 'excludes.txt')] : []),
      ...args,
    ];
    try {
      await promisify(execFile)(opts.uv, flags, { env: { ...process.env, ...env }, timeout: RESOLVE_TIMEOUT_MS, maxBuffer: 16 << 20 });
    } catch (e) {
      const err = e as Error & { stderr?: string; killed?: boolean };
      if (err.killed) return { failure: `the index did not resolve within ${RESOLVE_TIMEOUT_MS / 1000} s`, unsolvable: false };
      const said = err.stderr ?? err.message;
      return { failure: uvCause(said), unsolvable: said.includes('No solution found') };
    }
    const read = readPylock(readFileSync(join(work, 'pylock.toml'), 'utf8'), opts.settings);
    return 'lock' in read ? read : { ...read, unsolvable: false };
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}
