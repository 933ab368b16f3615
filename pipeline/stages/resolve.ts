/**
 * Stage `resolve`: the unit's environment. A manifest line's own `env` is used as written. A bare
 * line's is worked out from the repository's files, read as text on the host and never run
 * (pipeline/envs/evidence/read.ts): its requirements become Debian packages of the base that satisfies
 * the most (envs/debian/resolve.ts), its pytest configuration and test tooling give pytest arguments and
 * variables, and the project itself gets an install plan (envs/plan/install_plan.ts). The key is the hash of
 * that evidence and of the Debian indexes it was resolved against, so equal evidence resolves once;
 * an environment a build already had to repair for the same evidence is taken from the machine's
 * cache (envs/repair/cache.ts) instead of being repaired again. With a Python index
 * (--pip-index), what Debian cannot meet is locked on the host as of the commit's date
 * (pipeline/envs/index/lock.ts), for the first base in the Debian resolver's order whose lock
 * resolves. `build` installs and checks it.
 */

import { git } from '../../core/git.js';
import { hashOf } from '../../core/hashing.js';
import { type Resolution, resolutionKey, resolveDebian } from '../envs/debian/resolve.js';
import { type DebianIndex, loadDebianIndex } from '../envs/debian/suite_index.js';
import type { Evidence } from '../envs/evidence/context.js';
import { readEvidence } from '../envs/evidence/read.js';
import { cutoffTime, lockRequirements } from '../envs/index/lock.js';
import { type IndexSettings, indexSettings } from '../envs/index/settings.js';
import { UV_VERSION, uvBinary } from '../envs/index/uv.js';
import { installPlan } from '../envs/plan/install_plan.js';
import { versionAt } from '../envs/plan/scm_version.js';
import { readRepairedEnv } from '../envs/repair/cache.js';
import { normalizeName, requirementName } from '../envs/requirements/names.js';
import { mirrorPath, outLayout } from '../runtime/layout.js';
import { DEBIAN_SUITES, type LockedDist, PYTHON_VERSIONS, type Unit } from '../runtime/manifest.js';
import type { ResolveRecord } from '../runtime/records.js';
import { failed, ok, requireRecord, type Stage, type StageContext } from '../runtime/stage.js';

/** Bump when what a resolve record holds changes in a way the key's other fields do not show (it keys the repaired environments too). */
const RESOLVE_REVISION = 11;

/** The backend install needs pip beside the backend's own packages. */
const PIP = 'python3-pip';
/**
 * What compiling a project's own extension needs (evidence's `project.compiled`): Debian's C and
 * C++ compilers, the C library's headers (gcc only recommends them) and the base Python's.
 */
const COMPILER = ['gcc', 'g++', 'libc6-dev', 'python3-dev'];
/**
 * Debian's packages for the build programs a setup.py runs (evidence's `project.programs`): cmake
 * writes Makefiles by default, and Debian's cmake only recommends make.
 */
const PROGRAM_PACKAGES: Record<string, string[]> = { cmake: ['cmake', 'make'], ninja: ['ninja-build'], make: ['make'] };

/**
 * A local version label (`torch==2.0+cpu`) names a build on a vendor's own index; the index's
 * release of that version (`==2.0` matches it and its local builds) is the nearest.
 */
const released = (r: string) => r.replace(/(==\s*[^\s,;+]+)\+[A-Za-z0-9.]+/g, '$1');

/**
 * With a package index, what Debian cannot meet comes from it: every requirement no package of the
 * suite ships, and those whose bounds its package misses (that package then stays out, the index
 * gives the version asked for in its place, as long as nothing else asked for it). With `all`
 * (--index-for all), every Debian package a requirement asked for is replaced so.
 */
function indexRequirements(resolution: Resolution, all: boolean): { requirements: string[]; replaced: Set<string> } {
  // Plugins that reorder the tests on every run (they would make each run a different suite).
  const unwanted = (r: string) => /^pytest[-_.]random(ly|[-_.]order)\b/i.test(r);
  const requirements = resolution.unresolved.map((u) => u.requirement).filter((r) => !unwanted(r));
  const replaced = new Set(resolution.packages.filter((p) => all || p.asked.every((a) => !a.satisfied)).map((p) => p.package));
  for (const p of resolution.packages) if (replaced.has(p.package)) requirements.push(...p.asked.map((a) => a.requirement));
  return { requirements: [...new Set(requirements.map(released))].sort(), replaced };
}

/**
 * The Debian packages a lock makes redundant: each asked for only by projects the lock has too
 * (the index's tree pulled them in, numpy under pandas, torch under accelerate). The lock's
 * versions are the ones resolved together, and they would shadow Debian's anyway; installing both
 * costs the Debian package and its dependencies (python3-torch: about 1 GB) for nothing.
 */
function lockedInstead(resolution: Resolution, lock: LockedDist[]): Set<string> {
  const locked = new Set(lock.map((d) => normalizeName(d.name)));
  return new Set(resolution.packages.filter((p) => p.asked.every((a) => locked.has(requirementName(a.requirement)))).map((p) => p.package));
}

/** The suites a unit may be resolved against: its own Python's when the line names one, else every base's. */
function suiteIndexes(unit: Unit): Promise<DebianIndex[]> {
  const pythons = unit.pythonGiven ? [unit.python] : [...PYTHON_VERSIONS];
  return Promise.all(pythons.map((p) => loadDebianIndex(DEBIAN_SUITES[p])));
}

const source = (s: { file: string; line: number }) => `${s.file}:${s.line}`;

/** The index's upload cut-off for a unit: --exclude-newer, else its commit's date (ranges resolve as they would have then). */
async function cutoffOf(ctx: StageContext, commit: string): Promise<{ time: string; from: 'commit' | 'option' }> {
  if (ctx.options.excludeNewer) return { time: ctx.options.excludeNewer, from: 'option' };
  return { time: cutoffTime((await git(['--git-dir', mirrorPath(ctx.unit), 'show', '-s', '--format=%cI', commit])).trim()), from: 'commit' };
}

interface Locked {
  resolution: Resolution;
  fromIndex: ReturnType<typeof indexRequirements>;
  lock: LockedDist[];
  tried: string[];
  leftOut: string[];
  fromSdist: string[];
  /** Debian packages taken from the index instead, for the Debian packages they were made for (madeForShadowed), each with why. */
  moved: string[];
}

/** How many times the Debian packages built against the lock's projects are moved to the index and the tree locked again. */
const MAX_MOVES = 3;

/**
 * The Debian packages the unit would keep that depend on a Debian package the lock shadows (its
 * wheel of the same project comes first on the path): each was made for Debian's version of it,
 * not the lock's. A compiled one on a compiled one is built against it: Debian's
 * python3-torchvision, built for Debian's torch, segfaults at import under the index's torch 2.8.0
 * (lightly, in collection). Pure Python breaks too: Debian's fastapi 0.115 imports a name the
 * index's starlette deprecates, an error under logfire's filterwarnings (its FastAPI tests did not
 * collect). From the index, with the tree: a pure one at Debian's own version where the tree
 * allows it (`pin`: fastapi==0.115.11, whose metadata bounds starlette below 0.47, so the lock
 * sees what Debian put there), else at the version the tree allows; a compiled one at the version
 * the lock's build of its dependency needs. Each, with why.
 */
function madeForShadowed(
  resolution: Resolution,
  replaced: Set<string>,
  lock: LockedDist[],
  index: DebianIndex,
): { package: string; asked: string[]; pin?: string; why: string }[] {
  const shadowed = new Map<string, string>();
  for (const d of lock) {
    const name = normalizeName(d.name);
    for (const pkg of [...(index.distInfo.get(name) ?? []).map(([p]) => p), index.dhPython.get(name)]) if (pkg) shadowed.set(pkg, `${d.name} ${d.version}`);
  }
  const locked = new Set(lock.map((d) => normalizeName(d.name)));
  return (
    resolution.packages
      // One whose every asker the lock has is left out anyway (lockedInstead).
      .filter((p) => !replaced.has(p.package) && !p.asked.every((a) => locked.has(requirementName(a.requirement))))
      .flatMap((p) => {
        const on = index.pythonDepends.get(p.package)?.find((q) => shadowed.has(q));
        if (!on) return [];
        const built = index.compiled.has(p.package) && index.compiled.has(on);
        const debianVersion = (dist: string) => index.distInfo.get(dist)?.find(([pkg]) => pkg === p.package)?.[1];
        const dist = p.asked.map((a) => requirementName(a.requirement)).find((n) => debianVersion(n));
        return [
          {
            package: p.package,
            asked: p.asked.map((a) => released(a.requirement)),
            ...(!built && dist ? { pin: `${dist}==${debianVersion(dist)}` } : {}),
            why: `${p.package}: ${built ? 'built against' : 'made for'} Debian's ${on}, which the lock's ${shadowed.get(on)} shadows`,
          },
        ];
      })
  );
}

/**
 * The first base, in the Debian resolver's order (requires-python, the Python the project names,
 * most met), whose index requirements lock: a pin that predates the newest Python's wheels moves
 * the unit to an older base instead of failing in the build. A cause that is no resolution's (a
 * certificate, an unreachable index) stops at once: another Python would meet it too.
 */
async function lockedBase(
  ctx: StageContext,
  evidence: Evidence,
  first: Resolution,
  indexes: DebianIndex[],
  settings: IndexSettings,
  cutoff: string,
): Promise<Locked | { failure: string }> {
  const tried: string[] = [];
  let uv: string | undefined;
  for (const base of first.bases) {
    const resolution = base.suite === first.suite ? first : resolveDebian(evidence, [indexes.find((i) => i.suite === base.suite)!]);
    const fromIndex = indexRequirements(resolution, ctx.options.indexFor === 'all');
    if (!fromIndex.requirements.length) return { resolution, fromIndex, lock: [], tried, leftOut: [], fromSdist: [], moved: [] };
    // Fetched only for a unit that needs the index: a unit Debian meets whole costs nothing more.
    uv ??= await uvBinary(ctx.log);
    const lock = (requirements: string[]) => lockRequirements({ uv: uv!, settings, requirements, python: base.python, excludeNewer: cutoff });
    let locked = await lock(fromIndex.requirements);
    const moved: string[] = [];
    const index = indexes.find((i) => i.suite === base.suite)!;
    for (let round = 0; 'lock' in locked && round < MAX_MOVES; round++) {
      const clash = madeForShadowed(resolution, fromIndex.replaced, locked.lock, index);
      if (!clash.length) break;
      const requirements = [...new Set([...fromIndex.requirements, ...clash.flatMap((c) => c.asked)])].sort();
      // At Debian's versions first: the same code the unit would have had, now locked with the tree.
      const pins = clash.flatMap((c) => (c.pin ? [c.pin] : []));
      const pinned = pins.length ? await lock([...requirements, ...pins].sort()) : undefined;
      const atPins = pinned !== undefined && 'lock' in pinned;
      const again = atPins ? pinned : await lock(requirements);
      const at = (c: (typeof clash)[number]) => (atPins && c.pin ? ` (at Debian's ${c.pin})` : '');
      // Kept as Debian has them, and said so, when their projects do not lock with the tree.
      if ('failure' in again) {
        moved.push(...clash.map((c) => `${c.why}; kept from Debian: the index gives no lock with it (${again.failure.slice(0, 200)})`));
        break;
      }
      // One the index has no file of at the cut-off is left out of the lock, and Debian still gives it (below).
      const excluded = new Set(again.excluded);
      for (const c of clash) {
        const kept = c.asked.every((a) => excluded.has(requirementName(a)));
        if (!kept) fromIndex.replaced.add(c.package);
        moved.push(kept ? `${c.why}; kept from Debian: the index has none of it at the cut-off` : `${c.why}${at(c)}`);
      }
      fromIndex.requirements = atPins ? [...requirements, ...pins].sort() : requirements;
      locked = again;
    }
    if ('lock' in locked) {
      // What the index left out (no wheel at the cut-off, not there at all) Debian still gives, where it has it.
      const out = new Set(locked.excluded);
      for (const p of resolution.packages) if (p.asked.some((a) => out.has(requirementName(a.requirement)))) fromIndex.replaced.delete(p.package);
      return { resolution, fromIndex, lock: locked.lock, tried, leftOut: locked.leftOut, fromSdist: locked.fromSdist, moved };
    }
    tried.push(`python ${base.python}: ${locked.failure}`);
    if (!locked.unsolvable) break;
  }
  return { failure: `the Python index gives no lock: ${tried.join('; ')}` };
}

export const resolveStage: Stage<'resolve'> = {
  name: 'resolve',
  async key(ctx) {
    const { unit } = ctx;
    if (unit.envGiven) return { source: 'manifest', env: unit.env, python: unit.python, revision: RESOLVE_REVISION };
    const clone = requireRecord(ctx, 'clone');
    const evidence = readEvidence(outLayout.checkout(ctx.options.out, unit.id));
    return {
      source: 'inferred',
      resolution: resolutionKey(evidence, await suiteIndexes(unit)),
      pipIndex: ctx.options.pipIndex ?? null,
      index: ctx.options.pipIndex
        ? {
            settings: indexSettings(ctx.options.pipIndex),
            excludeNewer: ctx.options.excludeNewer ?? null,
            uv: UV_VERSION,
            ...(ctx.options.indexFor === 'all' ? { for: 'all' } : {}),
          }
        : null,
      python: unit.pythonGiven ? unit.python : null,
      commit: clone.commit,
      src: clone.src_layout,
      revision: RESOLVE_REVISION,
    };
  },
  async run(ctx: StageContext) {
    const { unit, options } = ctx;
    if (unit.envGiven) {
      return ok<ResolveRecord>({
        source: 'manifest',
        env: null,
        python: unit.python,
        key: null,
        cached: false,
        evidence_files: [],
        notes: [],
        packages: [],
        unresolved: [],
        install: null,
      });
    }
    const clone = requireRecord(ctx, 'clone');
    const checkout = outLayout.checkout(options.out, unit.id);
    const evidence = readEvidence(checkout);
    const indexes = await suiteIndexes(unit);
    const debian = resolveDebian(evidence, indexes);
    const settings = options.pipIndex ? indexSettings(options.pipIndex) : null;
    const cutoff = settings ? await cutoffOf(ctx, clone.commit) : null;
    const locked = settings && cutoff ? await lockedBase(ctx, evidence, debian, indexes, settings, cutoff.time) : null;
    if (locked && 'failure' in locked) return failed(locked.failure);
    const resolution = locked?.resolution ?? debian;
    // Through the project's own backend when Debian has it and the image gets packages anyway;
    // else its metadata is written directly, and a unit with nothing to install needs no network.
    const backendPackages = resolution.build.unresolved.length ? [] : resolution.build.packages.map((p) => p.package);
    const backend = !!resolution.build.backend && backendPackages.length > 0 && resolution.env.apt.length > 0;
    const instead = locked ? lockedInstead(resolution, locked.lock) : new Set<string>();
    const apt = locked ? resolution.env.apt.filter((p) => !locked.fromIndex.replaced.has(p) && !instead.has(p)) : resolution.env.apt;
    const inferred = {
      ...resolution.env,
      apt: backend
        ? [
            ...new Set([
              ...apt,
              PIP,
              ...backendPackages,
              ...(evidence.project.compiled ? COMPILER : []),
              ...(evidence.project.programs ?? []).flatMap((p) => PROGRAM_PACKAGES[p.name] ?? []),
            ]),
          ].sort()
        : apt,
      ...(locked?.lock.length ? { lock: locked.lock } : {}),
    };
    // A repair is reused only for the environment it started from (its packages, lock and pytest
    // paths) and the index it may have added from: a resolver that now infers another starts afresh.
    const cacheKey = hashOf({ resolution: debian.key, pipIndex: options.pipIndex ?? null, inferred, revision: RESOLVE_REVISION });
    const repaired = readRepairedEnv(cacheKey, clone.commit);
    const env = repaired?.env ?? inferred;
    const version = await versionAt(mirrorPath(unit), clone.commit);
    ctx.log(`resolve ${unit.id}: python ${repaired?.python ?? resolution.python}, ${env.apt.length} package(s)${repaired ? ' (as repaired before)' : ''}`);
    return ok<ResolveRecord>({
      source: 'inferred',
      env,
      python: repaired?.python ?? resolution.python,
      key: cacheKey,
      cached: !!repaired,
      evidence_files: evidence.files.map((f) => f.path),
      notes: evidence.notes.map((n) => `${source(n.source)}: ${n.message}`),
      packages: resolution.packages.map((p) => ({
        package: p.package,
        version: p.version,
        via: p.via,
        asked: p.asked.map((a) => `${a.requirement} (${a.group}, ${source(a.source)})`),
      })),
      unresolved: [...resolution.unresolved, ...resolution.build.unresolved].map((u) => `${u.requirement} (${u.group}, ${source(u.source)}): ${u.detail}`),
      install: installPlan(checkout, clone.src_layout, evidence, version, backend),
      ...(settings && cutoff && locked
        ? {
            index: {
              mode: settings.mode,
              exclude_newer: cutoff.time,
              exclude_newer_from: cutoff.from,
              tried: locked.tried,
              ...(locked.leftOut.length ? { left_out: locked.leftOut } : {}),
              ...(locked.fromSdist.length ? { from_sdist: locked.fromSdist } : {}),
              ...(instead.size ? { instead_of_debian: [...instead].sort() } : {}),
              ...(locked.moved.length ? { moved_to_index: locked.moved } : {}),
            },
          }
        : {}),
    });
  },
};
