/**
 * Stage `clone`: one bare mirror per repository (a cache shared by every output folder), the
 * pinned commit extracted as a clean tree, and the provenance of that tree. A local folder that
 * is not a git repository is snapshotted into a single commit whose SHA depends only on content.
 */
import { existsSync, lstatSync, mkdirSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { archiveTo, FIXED_COMMIT_ENV, GitError, git, missingFiles } from '../../core/git.js';
import { hashTree } from '../../core/hashing.js';
import { detectLicense } from '../../core/license.js';
import { withLock } from '../../core/lock.js';
import { mirrorPath, mirrorsDir, outLayout } from '../runtime/layout.js';
import type { Unit } from '../runtime/manifest.js';
import { failed, ok, type Stage, type StageContext } from '../runtime/stage.js';

const SNAPSHOT_EXCLUDES = ['__pycache__/', '*.py[cod]', '.pytest_cache/', '.mypy_cache/', '.tox/', '.venv/', '*.egg-info/'];

/** Commits a plain folder's content into the mirror; same content, same SHA. */
async function snapshotFolder(folder: string, mirror: string): Promise<string> {
  if (!existsSync(join(mirror, 'HEAD'))) await git(['init', '-q', '--bare', mirror]);
  writeFileSync(join(mirror, 'info', 'exclude'), SNAPSHOT_EXCLUDES.join('\n') + '\n');
  const index = join(mirror, `snapshot-index-${process.pid}`);
  const env = { GIT_INDEX_FILE: index };
  try {
    rmSync(index, { force: true });
    await git(['--git-dir', mirror, '--work-tree', folder, 'add', '-A', '.'], { env });
    const tree = (await git(['--git-dir', mirror, '--work-tree', folder, 'write-tree'], { env })).trim();
    const commit = (await git(['--git-dir', mirror, 'commit-tree', tree, '-m', 'Worldline snapshot'], { env: FIXED_COMMIT_ENV })).trim();
    await git(['--git-dir', mirror, 'update-ref', 'refs/heads/snapshot', commit]);
    return commit;
  } finally {
    rmSync(index, { force: true });
  }
}

async function hasCommit(mirror: string, commit: string): Promise<boolean> {
  try {
    await git(['--git-dir', mirror, 'cat-file', '-e', `${commit}^{commit}`]);
    return true;
  } catch {
    return false;
  }
}

/** Fetches into the mirror only when the wanted commit is not already there. */
async function syncMirror(unit: Unit, mirror: string): Promise<string> {
  if (!existsSync(join(mirror, 'HEAD'))) {
    rmSync(mirror, { recursive: true, force: true });
    await git(['clone', '-q', '--mirror', unit.location, mirror]);
  } else if (!unit.commit || !(await hasCommit(mirror, unit.commit))) {
    await git(['--git-dir', mirror, 'remote', 'update', '--prune']);
  }
  const wanted = unit.commit ?? 'HEAD';
  try {
    return (await git(['--git-dir', mirror, 'rev-parse', '--verify', '--end-of-options', `${wanted}^{commit}`])).trim();
  } catch {
    throw new GitError(`commit ${wanted} does not exist in ${unit.repo}`);
  }
}

interface TreeCounts {
  size_bytes: number;
  file_count: number;
  py_file_count: number;
}

function countTree(root: string): TreeCounts {
  const counts: TreeCounts = { size_bytes: 0, file_count: 0, py_file_count: 0 };
  const walk = (dir: string) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) walk(path);
      else {
        counts.file_count += 1;
        counts.size_bytes += lstatSync(path).size;
        if (entry.name.endsWith('.py')) counts.py_file_count += 1;
      }
    }
  };
  walk(root);
  return counts;
}

/** A src/ layout: importable code under src/ (a package or a module) rather than at the root. */
export function isSrcLayout(root: string): boolean {
  const src = join(root, 'src');
  if (!existsSync(src) || !statSync(src).isDirectory()) return false;
  return readdirSync(src, { withFileTypes: true }).some(
    (e) => (e.isDirectory() && existsSync(join(src, e.name, '__init__.py'))) || (e.isFile() && e.name.endsWith('.py')),
  );
}

/** A bare repository (a mirror, a `git clone --bare`): git's own files at the folder's top, no work tree. */
const isBareRepository = (path: string) =>
  existsSync(join(path, 'HEAD')) && existsSync(join(path, 'objects')) && existsSync(join(path, 'refs')) && !existsSync(join(path, '.git'));

async function resolveSource(unit: Unit, mirror: string): Promise<string> {
  if (unit.sourceKind === 'local' && !isBareRepository(unit.location)) {
    if (!existsSync(unit.location)) throw new GitError(`local path ${unit.location} does not exist`);
    if (!statSync(unit.location).isDirectory()) throw new GitError(`local path ${unit.location} is not a folder`);
    // A .git file (a worktree or submodule pointer) or link makes git read a repository elsewhere
    // on the host, which would then ship under this folder's name: only a real .git folder counts.
    const dotGit = join(unit.location, '.git');
    if (existsSync(dotGit) && !lstatSync(dotGit).isDirectory()) {
      throw new GitError(`${dotGit} is not a folder (a pointer to a repository elsewhere); refused: name that repository itself`);
    }
    if (!existsSync(join(unit.location, '.git'))) {
      if (unit.commit) throw new GitError(`${unit.location} is a plain folder, not a git repository, so "commit" cannot be pinned`);
      return snapshotFolder(unit.location, mirror);
    }
  }
  return syncMirror(unit, mirror);
}

/**
 * What an unpinned local source holds now, so that editing a folder or committing to a local
 * repository between runs clones again instead of reusing the ledger. Remote URLs without a
 * commit are keyed by location only: asking the remote would cost a network round trip per unit.
 */
async function localFingerprint(unit: Unit): Promise<string | null> {
  if (unit.sourceKind !== 'local' || unit.commit || !existsSync(unit.location)) return null;
  const bare = isBareRepository(unit.location);
  if (!bare && !existsSync(join(unit.location, '.git'))) return hashTree(unit.location, '');
  try {
    return (await git(bare ? ['--git-dir', unit.location, 'rev-parse', 'HEAD'] : ['rev-parse', 'HEAD'], { cwd: unit.location })).trim();
  } catch {
    return null;
  }
}

/**
 * How many files a checkout may lack (their contents absent from the repository: the largest
 * files of a partial clone or a trimmed mirror) and still be the commit's tree, less them.
 */
const MAX_MISSING_FILES = 500;

export const cloneStage: Stage<'clone'> = {
  name: 'clone',
  key: async (ctx) => ({ location: ctx.unit.location, commit: ctx.unit.commit ?? null, now: await localFingerprint(ctx.unit) }),
  async run(ctx: StageContext) {
    const { unit, options } = ctx;
    const mirror = mirrorPath(unit);
    mkdirSync(mirrorsDir(), { recursive: true });
    let commit: string;
    try {
      commit = await withLock(`${mirror}.lock`, () => resolveSource(unit, mirror));
    } catch (e) {
      if (e instanceof GitError) return failed(`cannot get ${unit.repo}: ${e.message}`);
      throw e;
    }
    const dest = outLayout.checkout(options.out, unit.id);
    rmSync(dest, { recursive: true, force: true });
    mkdirSync(dest, { recursive: true });
    const missing = await missingFiles(mirror, commit);
    if (missing.length > MAX_MISSING_FILES)
      return failed(`${unit.repo} at ${commit.slice(0, 12)} lacks the contents of ${missing.length} files (${missing.slice(0, 3).join(', ')}, ...)`);
    await archiveTo(mirror, commit, dest, missing);
    const license = detectLicense(dest);
    ctx.log(
      `clone ${unit.id}: ${commit.slice(0, 12)} (${license.spdx})` +
        (missing.length ? `; ${missing.length} file(s) whose contents the repository lacks left out: ${missing.slice(0, 5).join(', ')}` : ''),
    );
    return ok({
      commit,
      checkout: outLayout.checkoutRel(unit.id),
      license: license.spdx,
      license_file: license.file,
      ...countTree(dest),
      src_layout: isSrcLayout(dest),
      ...(missing.length ? { missing_files: missing } : {}),
    });
  },
};
