/**
 * Repair through the Python index: a module the tests import that no Debian package of the suite
 * ships (`No module named 'linear_operator'`) becomes a distribution of the index, locked again
 * with the unit's lock as of its cut-off, and taken only when that distribution's wheel holds the
 * module (its files, read on the host): a name on the index that is some other project's
 * (`agents` is not openai-agents) is refused, not installed. Each change says why; a refusal is
 * recorded with the attempt.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import type { LockedDist, PythonVersion, UnitEnv } from '../../runtime/manifest.js';
import { fetchLocked } from '../index/download.js';
import { lockRequirements } from '../index/lock.js';
import type { IndexSettings } from '../index/settings.js';
import { normalizeName } from '../requirements/names.js';
import type { Problem } from './rules.js';

/** What an index repair needs of the unit: where its index is, its cut-off, and uv. */
export interface IndexRepair {
  settings: IndexSettings;
  excludeNewer: string;
  uv: () => Promise<string>;
  log: (line: string) => void;
}

/** The wheel's top-level names: its packages and modules, as `import` sees them. */
async function topLevelNames(wheel: string): Promise<Set<string>> {
  const script = 'import sys, zipfile\nfor n in zipfile.ZipFile(sys.argv[1]).namelist(): print(n)';
  const { stdout } = await promisify(execFile)('python3', ['-c', script, wheel], { maxBuffer: 64 << 20 });
  const names = new Set<string>();
  for (const path of stdout.split('\n')) {
    const first = path.split('/')[0];
    if (!first || /\.(dist-info|data)$/.test(first)) continue;
    names.add(path.includes('/') ? first : first.replace(/\.(py|so|pyd)$|\.cpython-.*$|\.abi3\.so$/, ''));
  }
  return names;
}

/** How many modules one repair looks up on the index (each costs a lock or two). */
const MAX_LOOKUPS = 5;

/**
 * The lock with a distribution added for each module in `modules` (the module's top-level name as
 * the distribution's, checked against its wheel), one at a time so that a name the index lacks
 * costs only itself; null when none was added. `refused` gets why each other one was not.
 */
export async function repairFromIndex(
  env: UnitEnv,
  python: PythonVersion,
  modules: Extract<Problem, { kind: 'module' }>[],
  ix: IndexRepair,
  refused: string[],
): Promise<{ env: UnitEnv; changes: string[] } | null> {
  let lock: LockedDist[] = env.lock ?? [];
  const have = new Set(lock.map((d) => normalizeName(d.name)));
  const wanted = new Map<string, Extract<Problem, { kind: 'module' }>>();
  for (const m of modules) {
    const dist = normalizeName(m.module.split('.')[0].replace(/^_+/, ''));
    if (!have.has(dist) && !wanted.has(dist)) wanted.set(dist, m);
  }
  if (!wanted.size) return null;
  const uv = await ix.uv();
  const changes: string[] = [];
  for (const [dist, problem] of [...wanted].slice(0, MAX_LOOKUPS)) {
    const relock = (pinned: boolean) =>
      lockRequirements({
        uv,
        settings: ix.settings,
        requirements: [...lock.map((d) => (pinned ? `${d.name}==${d.version}` : d.name)), dist],
        python,
        excludeNewer: ix.excludeNewer,
      });
    // The unit's versions kept where the addition allows; else the whole tree again, as of the same cut-off.
    let locked = await relock(true);
    if (!('lock' in locked)) locked = await relock(false);
    if (!('lock' in locked)) {
      refused.push(`index: ${dist}: ${locked.failure}`);
      continue;
    }
    const found = locked.lock.find((d) => normalizeName(d.name) === dist);
    if (!found) {
      refused.push(`index: ${dist}: left out of the lock (${locked.leftOut.join('; ')})`);
      continue;
    }
    const top = problem.module.split('.')[0];
    const [wheel] = (await fetchLocked([found], { cert: ix.settings.cert, proxy: ix.settings.proxy })).paths;
    if (!(await topLevelNames(wheel)).has(top)) {
      refused.push(`index: ${found.name} ${found.version} does not hold the module ${top}`);
      continue;
    }
    lock = locked.lock;
    changes.push(`+${found.name}==${found.version} from the index: ${problem.line}`);
  }
  if (!changes.length) return null;
  ix.log(`repair: ${changes.length} distribution(s) from the index`);
  return { env: { ...env, lock }, changes };
}

/**
 * The unit's lock for another base's Python, when a repair moves it there: the same distributions,
 * unpinned, as of the same cut-off (its wheels are per Python: cp311 files do not install on 3.13).
 * Null, with why in `refused`, when they do not lock there.
 */
export async function relockForPython(env: UnitEnv, python: PythonVersion, ix: IndexRepair, refused: string[]): Promise<UnitEnv | null> {
  if (!env.lock?.length) return env;
  const locked = await lockRequirements({
    uv: await ix.uv(),
    settings: ix.settings,
    requirements: env.lock.map((d) => d.name),
    python,
    excludeNewer: ix.excludeNewer,
  });
  if ('lock' in locked) return { ...env, lock: locked.lock };
  refused.push(`index: the lock for python ${python}: ${locked.failure}`);
  return null;
}
