/**
 * A distribution the index has no wheel of at the cut-off (apricot-select 0.6.1, which pomegranate
 * needs, was published as an sdist alone), taken as its sdist. Chosen on the host from the index's
 * PEP 691 page: the newest release whose sdist was uploaded by the cut-off and meets the tree's
 * specifiers for it. Read on the host without running it: its pyproject's build requirements
 * (setuptools and wheel where it names none, as pip and uv assume) and its PKG-INFO's dependencies,
 * which join the tree so the lock holds them. Built only where install-time code may run: uv builds
 * it inside the unit's build container, offline, from the mounted folder with its build requirements
 * beside it (install.ts), and the lock's hash pins the sdist as it pins a wheel.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { parse } from 'smol-toml';
import type { LockedDist } from '../../runtime/manifest.js';
import { normalizeName } from '../requirements/names.js';
import { compareVersions, isPrerelease, parseVersion, satisfiesAll, type Version } from '../requirements/pep440.js';
import { parseRequirement } from '../requirements/pep508.js';
import { fetchLocked, fetchPage } from './download.js';
import type { IndexSettings } from './settings.js';

const PEP691 = 'application/vnd.pypi.simple.v1+json';
const PYPI = 'https://pypi.org/simple/';
/** What a build requirement defaults to for a project that names none (PEP 517's fallback, as pip takes it). */
const LEGACY_BUILD = ['setuptools>=40.8.0', 'wheel'];

export interface Sdist {
  dist: LockedDist;
  /** What building it needs (its build-system.requires). */
  buildRequires: string[];
  /** Its dependencies, as its PKG-INFO says them, extras left out. */
  requires: string[];
}

interface PageFile {
  filename: string;
  url: string;
  hashes?: { sha256?: string };
  'upload-time'?: string;
  yanked?: boolean | string;
}

/** The version in an sdist's file name (`apricot-select-0.6.1.tar.gz`, `apricot_select-0.6.1.tar.gz`), if it is `name`'s. */
function sdistVersion(filename: string, name: string): string | undefined {
  if (!filename.endsWith('.tar.gz')) return undefined;
  const stem = filename.slice(0, -'.tar.gz'.length);
  for (let i = stem.lastIndexOf('-'); i > 0; i = stem.lastIndexOf('-', i - 1)) {
    if (normalizeName(stem.slice(0, i)) === name) return stem.slice(i + 1);
  }
  return undefined;
}

/** The specifiers the requirement lines give `name` (any line naming it; markers are not weighed). */
function specifiersOf(name: string, requirements: string[]) {
  return requirements.flatMap((line) => {
    try {
      const req = parseRequirement(line);
      return req.key === name ? req.specifiers : [];
    } catch {
      return [];
    }
  });
}

/**
 * The newest sdist of `name` on the first index that has one for the cut-off, or why none: a page
 * only PEP 503's HTML gives carries no upload times, so an index without PEP 691 gives none.
 */
async function chooseSdist(name: string, requirements: string[], settings: IndexSettings, cutoff: string): Promise<LockedDist | string> {
  const specs = specifiersOf(name, requirements);
  const indexes = settings.noIndex ? [] : [settings.indexUrl ?? PYPI, ...settings.extraIndexUrls].filter((u) => /^https?:\/\//i.test(u));
  const seen: string[] = [];
  for (const index of indexes) {
    const page = new URL(`${name}/`, index.endsWith('/') ? index : `${index}/`).href;
    let text: string;
    try {
      text = await fetchPage(page, PEP691, settings);
    } catch (e) {
      seen.push(`${index}: ${(e as Error).message}`);
      continue;
    }
    let files: PageFile[];
    try {
      files = (JSON.parse(text) as { files?: PageFile[] }).files ?? [];
    } catch {
      seen.push(`${index}: answers no PEP 691 JSON (upload times are needed for the cut-off)`);
      continue;
    }
    const candidates: { file: PageFile; version: Version; text: string }[] = [];
    for (const file of files) {
      const text = sdistVersion(file.filename, name);
      const uploaded = file['upload-time'];
      if (!text || file.yanked || !file.hashes?.sha256 || !uploaded || new Date(uploaded) > new Date(cutoff)) continue;
      try {
        const version = parseVersion(text);
        if (satisfiesAll(version, specs)) candidates.push({ file, version, text });
      } catch {
        // A file name whose version PEP 440 does not read: not a release to choose.
      }
    }
    // A pre-release only where nothing else will do, as resolvers choose.
    const finals = candidates.filter((c) => !isPrerelease(c.version));
    const best = (finals.length ? finals : candidates).sort((a, b) => compareVersions(b.version, a.version))[0];
    if (!best) {
      seen.push(`${index}: no sdist uploaded by ${cutoff}${specs.length ? ' that meets the tree' : ''}`);
      continue;
    }
    return { name, version: best.text, filename: best.file.filename, url: new URL(best.file.url, page).href, sha256: best.file.hashes!.sha256! };
  }
  return seen.join('; ') || 'no index that answers PEP 691 (upload times are needed for the cut-off)';
}

/** One member at the top of the sdist's folder (`<name>-<version>/PKG-INFO`), or undefined; tar reads it, nothing runs. */
async function member(path: string, file: string): Promise<string | undefined> {
  const run = promisify(execFile);
  const { stdout: listing } = await run('tar', ['-tzf', path], { maxBuffer: 64 << 20, timeout: 60_000 });
  const entry = listing.split('\n').find((e) => /^[^/]+\/[^/]+$/.test(e) && e.endsWith(`/${file}`));
  if (!entry) return undefined;
  return (await run('tar', ['-xzOf', path, entry], { maxBuffer: 16 << 20, timeout: 60_000 })).stdout;
}

/** `Requires-Dist` of a PKG-INFO, those for an extra left out. */
function pkgInfoRequires(text: string): string[] {
  const headers = text.split(/\r?\n\r?\n/)[0];
  return headers
    .split(/\r?\n/)
    .flatMap((l) => (/^Requires-Dist:/i.test(l) ? [l.slice(l.indexOf(':') + 1).trim()] : []))
    .filter((r) => r && !/\bextra\s*==/.test(r));
}

/**
 * `name`'s sdist at the cut-off, fetched into the host's cache and read: what to lock beside it,
 * or why it cannot be taken.
 */
export async function sdistAtCutoff(name: string, requirements: string[], settings: IndexSettings, cutoff: string): Promise<Sdist | { failure: string }> {
  const chosen = await chooseSdist(normalizeName(name), requirements, settings, cutoff);
  if (typeof chosen === 'string') return { failure: chosen };
  let path: string;
  try {
    [path] = (await fetchLocked([chosen], settings)).paths;
  } catch (e) {
    return { failure: (e as Error).message };
  }
  try {
    const pyproject = await member(path, 'pyproject.toml');
    const system = pyproject === undefined ? undefined : (parse(pyproject) as { 'build-system'?: { requires?: unknown } })['build-system'];
    const named = Array.isArray(system?.requires) ? system.requires.filter((r): r is string => typeof r === 'string') : undefined;
    const info = await member(path, 'PKG-INFO');
    return { dist: chosen, buildRequires: named ?? LEGACY_BUILD, requires: info ? pkgInfoRequires(info) : [] };
  } catch (e) {
    return { failure: `${chosen.filename} is not a readable sdist: ${(e as Error).message.split('\n')[0]}` };
  }
}
