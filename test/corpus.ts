// A real, offline test corpus: third-party Python projects with their own test suites, taken from
// Debian binary packages (the only package source these machines reach) and laid out as git
// checkouts with one reproducible commit each. See shared/corpus/README.md for the recipe and for
// where the expected counts come from (Debian 12, Python 3.11.2, pytest 7.2.1, --network none).
//
// Only node builtins; every external command runs through execFile with an argument vector.

import { execFile } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import * as fs from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';

export type Suite = 'bookworm' | 'trixie';

export interface CorpusProject {
  /** Short project name; also the folder name of the checkout: 'toolz'. */
  name: string;
  /** The Debian binary package the project comes from: 'python3-toolz'. */
  debPackage: string;
  /** Top-level entries copied out of usr/lib/python3/dist-packages, e.g. ['toolz', 'tlz']. */
  entries: string[];
  /** Debian packages the environment image needs (the project's python Depends + test extras). */
  apt: string[];
  /** Extra pytest arguments (deselections for files the binary package does not ship). */
  pytestArgs: string[];
  /** Counts measured on Debian 12 / Python 3.11 (README table); other suites may differ. */
  expected: { collected: number; passed: number; failed: number; skipped: number; xfailed?: number };
}

export interface MaterializeOptions {
  /** Debian suite to take the package from (default 'bookworm'). */
  suite?: Suite;
  /**
   * Cache root (absolute, or resolved against the working directory). Default:
   * `${WORLDLINE_CACHE ?? '/var/cache/worldline'}`. Debs land in `<cacheDir>/debs/<suite>/`; a suite
   * other than the host's own uses a private apt state in `<cacheDir>/{<suite>.sources,
   * lists-<suite>, apt-<suite>}`.
   */
  cacheDir?: string;
}

export interface MaterializedProject {
  path: string;
  commit: string;
  project: CorpusProject;
}

export const CORPUS: Record<string, CorpusProject> = {
  toolz: {
    name: 'toolz',
    debPackage: 'python3-toolz',
    entries: ['toolz', 'tlz'],
    apt: [],
    pytestArgs: [],
    expected: { collected: 180, passed: 180, failed: 0, skipped: 0 },
  },
  h11: {
    name: 'h11',
    debPackage: 'python3-h11',
    entries: ['h11'],
    apt: [],
    pytestArgs: [],
    expected: { collected: 78, passed: 78, failed: 0, skipped: 0 },
  },
  isodate: {
    name: 'isodate',
    debPackage: 'python3-isodate',
    entries: ['isodate'],
    apt: ['python3-six'],
    pytestArgs: [],
    expected: { collected: 18, passed: 18, failed: 0, skipped: 0 },
  },
  hyperlink: {
    name: 'hyperlink',
    debPackage: 'python3-hyperlink',
    entries: ['hyperlink'],
    apt: ['python3-idna'],
    pytestArgs: [],
    expected: { collected: 99, passed: 99, failed: 0, skipped: 0 },
  },
  simplejson: {
    name: 'simplejson',
    debPackage: 'python3-simplejson',
    entries: ['simplejson'],
    apt: [],
    pytestArgs: [],
    expected: { collected: 142, passed: 142, failed: 0, skipped: 0 },
  },
  traitlets: {
    name: 'traitlets',
    debPackage: 'python3-traitlets',
    entries: ['traitlets'],
    apt: [],
    pytestArgs: [],
    expected: { collected: 557, passed: 557, failed: 0, skipped: 0 },
  },
  jsonschema: {
    name: 'jsonschema',
    debPackage: 'python3-jsonschema',
    entries: ['jsonschema'],
    apt: ['python3-attr', 'python3-pyrsistent'],
    pytestArgs: ['--ignore=jsonschema/tests/test_jsonschema_test_suite.py', '--deselect', 'jsonschema/tests/test_cli.py::TestCLIIntegration::test_license'],
    expected: { collected: 408, passed: 404, failed: 0, skipped: 4 },
  },
  mpmath: {
    name: 'mpmath',
    debPackage: 'python3-mpmath',
    entries: ['mpmath'],
    apt: [],
    pytestArgs: [],
    expected: { collected: 340, passed: 338, failed: 0, skipped: 0, xfailed: 2 },
  },
};

// ---------------------------------------------------------------------------------------------
// Constants that fix the commit SHA. Changing any of them (or the layout code) changes every SHA;
// bump LAYOUT_VERSION then, so memoized SHAs in the cache are not reused.

const LAYOUT_VERSION = 1;
const COMMIT_DATE = '2024-01-01T00:00:00Z';
const COMMIT_NAME = 'Worldline Corpus';
const COMMIT_EMAIL = 'corpus@worldline.invalid';
const DEBIAN_KEYRING = '/usr/share/keyrings/debian-archive-keyring.gpg';
const DIST_PACKAGES = 'usr/lib/python3/dist-packages';
const APT_TIMEOUT_MS = 10 * 60_000;
const CMD_TIMEOUT_MS = 2 * 60_000;

// ---------------------------------------------------------------------------------------------
// Process helpers

interface RunResult {
  stdout: string;
  stderr: string;
}

class CommandError extends Error {
  constructor(
    message: string,
    readonly stdout: string,
    readonly stderr: string,
  ) {
    super(message);
    this.name = 'CommandError';
  }
}

function tail(text: string, max = 2000): string {
  const t = text.trim();
  return t.length > max ? `...${t.slice(t.length - max)}` : t;
}

function run(file: string, args: string[], opts: { cwd?: string; env?: NodeJS.ProcessEnv; timeoutMs?: number } = {}): Promise<RunResult> {
  return new Promise((resolve, reject) => {
    execFile(
      file,
      args,
      {
        cwd: opts.cwd,
        env: opts.env ?? process.env,
        timeout: opts.timeoutMs ?? CMD_TIMEOUT_MS,
        maxBuffer: 64 * 1024 * 1024,
        encoding: 'utf8',
      },
      (err, stdout, stderr) => {
        if (err) {
          const e = err as NodeJS.ErrnoException & { killed?: boolean; signal?: string | null };
          const how =
            e.code === 'ENOENT'
              ? 'not found on PATH'
              : e.killed
                ? `timed out or killed (${e.signal ?? 'signal'})`
                : `exited with ${String(e.code ?? e.signal)}`;
          reject(new CommandError(`${file} ${args.join(' ')}: ${how}${stderr ? `\n${tail(stderr)}` : ''}`, stdout ?? '', stderr ?? ''));
          return;
        }
        resolve({ stdout, stderr });
      },
    );
  });
}

async function exists(p: string): Promise<boolean> {
  try {
    await fs.lstat(p);
    return true;
  } catch {
    return false;
  }
}

async function tempDirIn(parent: string, prefix: string): Promise<string> {
  await fs.mkdir(parent, { recursive: true });
  return fs.mkdtemp(path.join(parent, prefix));
}

/** Memoize a promise by key for the life of the process; a rejected promise is forgotten. */
function memo<T>(map: Map<string, Promise<T>>, key: string, make: () => Promise<T>): Promise<T> {
  const hit = map.get(key);
  if (hit) return hit;
  const p = make();
  map.set(key, p);
  p.catch(() => {
    if (map.get(key) === p) map.delete(key);
  });
  return p;
}

// ---------------------------------------------------------------------------------------------
// apt

function cacheRoot(opts?: MaterializeOptions): string {
  return path.resolve(opts?.cacheDir ?? process.env.WORLDLINE_CACHE ?? '/var/cache/worldline');
}

let hostCodenamePromise: Promise<string | undefined> | undefined;
function hostCodename(): Promise<string | undefined> {
  hostCodenamePromise ??= fs
    .readFile('/etc/os-release', 'utf8')
    .then((text) => /^VERSION_CODENAME=("?)([^"\n]*)\1$/m.exec(text)?.[2] || undefined)
    .catch(() => undefined);
  return hostCodenamePromise;
}

interface AptContext {
  suite: Suite;
  root: string;
  /** apt-get options; empty for the host's own apt. */
  options: string[];
  /** Private state (suites other than the host's): lists dir to fill once. */
  privateLists?: string;
}

async function aptContext(suite: Suite, root: string): Promise<AptContext> {
  const sandbox = process.getuid?.() === 0 ? ['-o', 'APT::Sandbox::User=root'] : [];
  if ((await hostCodename()) === suite) return { suite, root, options: [...sandbox] };
  const mirror = process.env.WORLDLINE_DEBIAN_MIRROR ?? 'http://deb.debian.org/debian';
  const sources = path.join(root, `${suite}.sources`);
  const lists = path.join(root, `lists-${suite}`);
  const cache = path.join(root, `apt-${suite}`);
  await fs.mkdir(path.join(lists, 'partial'), { recursive: true });
  await fs.mkdir(path.join(cache, 'archives', 'partial'), { recursive: true });
  const text = `Types: deb\nURIs: ${mirror}\nSuites: ${suite}\nComponents: main\nSigned-By: ${DEBIAN_KEYRING}\n`;
  const current = await fs.readFile(sources, 'utf8').catch(() => undefined);
  if (current !== text) {
    const tmp = `${sources}.${process.pid}.${randomBytes(4).toString('hex')}`;
    await fs.writeFile(tmp, text);
    await fs.rename(tmp, sources);
  }
  return {
    suite,
    root,
    privateLists: lists,
    options: [
      '-o',
      `Dir::Etc::SourceList=${sources}`,
      '-o',
      'Dir::Etc::SourceParts=/dev/null',
      '-o',
      `Dir::State::Lists=${lists}`,
      '-o',
      `Dir::Cache=${cache}`,
      // No on-disk binary caches: several processes may share this state.
      '-o',
      'Dir::Cache::pkgcache=',
      '-o',
      'Dir::Cache::srcpkgcache=',
      ...sandbox,
    ],
  };
}

async function listsPopulated(dir: string): Promise<boolean> {
  const names = await fs.readdir(dir).catch(() => [] as string[]);
  return names.some((n) => /_Packages(\.[a-z0-9]+)?$/.test(n));
}

const updates = new Map<string, Promise<void>>();

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/**
 * Run `apt-get update` in `ctx`. Another process holding apt's lock on the same lists is waited for;
 * with `untilPopulated`, its finished update counts as ours.
 */
async function aptUpdate(ctx: AptContext, untilPopulated: boolean): Promise<void> {
  const deadline = Date.now() + APT_TIMEOUT_MS;
  for (;;) {
    if (untilPopulated && ctx.privateLists && (await listsPopulated(ctx.privateLists))) return;
    try {
      await run('apt-get', [...ctx.options, '-q', 'update'], { timeoutMs: APT_TIMEOUT_MS });
      return;
    } catch (err) {
      const stderr = err instanceof CommandError ? err.stderr : '';
      if (/Could not get lock|Unable to lock/.test(stderr) && Date.now() < deadline) {
        await sleep(1000);
        continue;
      }
      throw new Error(`apt-get update for Debian ${ctx.suite} failed: ${(err as Error).message}`);
    }
  }
}

/** First `apt-get update` of a private apt state, once per process and only while its lists are empty. */
function aptUpdateOnce(ctx: AptContext): Promise<void> {
  return memo(updates, ctx.privateLists ?? 'host', async () => {
    await aptUpdate(ctx, true);
    if (ctx.privateLists && !(await listsPopulated(ctx.privateLists))) {
      throw new Error(`apt-get update for Debian ${ctx.suite} left no package lists in ${ctx.privateLists}`);
    }
  });
}

let hostListsPromise: Promise<string> | undefined;
function hostListsDir(): Promise<string> {
  hostListsPromise ??= run('apt-config', ['shell', 'L', 'Dir::State::Lists/d'])
    .then(({ stdout }) => /^L='(.*)'$/m.exec(stdout)?.[1] ?? '/var/lib/apt/lists')
    .catch(() => '/var/lib/apt/lists');
  return hostListsPromise;
}

/** An unconditional `apt-get update` for this context, at most once per process. */
function aptRefreshOnce(ctx: AptContext): Promise<void> {
  return memo(updates, `refresh\0${ctx.privateLists ?? 'host'}`, async () => {
    // A private state's first update may be running: let it finish rather than contend for apt's lock.
    if (ctx.privateLists) await aptUpdateOnce(ctx);
    await aptUpdate(ctx, false);
  });
}

async function debVersionField(deb: string, field: string): Promise<string> {
  return (await run('dpkg-deb', ['-f', deb, field])).stdout.trim();
}

async function newestCachedDeb(dir: string, pkg: string): Promise<string | undefined> {
  const names = (await fs.readdir(dir).catch(() => [] as string[])).filter((n) => n.startsWith(`${pkg}_`) && n.endsWith('.deb'));
  if (names.length === 0) return undefined;
  let best = path.join(dir, names[0]);
  if (names.length > 1) {
    let bestVersion = await debVersionField(best, 'Version');
    for (const n of names.slice(1)) {
      const p = path.join(dir, n);
      const v = await debVersionField(p, 'Version');
      const gt = await run('dpkg', ['--compare-versions', v, 'gt', bestVersion]).then(
        () => true,
        () => false,
      );
      if (gt) {
        best = p;
        bestVersion = v;
      }
    }
  }
  return best;
}

const downloads = new Map<string, Promise<string>>();

/** The cached .deb of `pkg` for `suite`, downloading it with `apt-get download` if absent. */
export function fetchDeb(pkg: string, suite: Suite, root: string): Promise<string> {
  const dir = path.join(root, 'debs', suite);
  return memo(downloads, `${dir}\0${pkg}`, async () => {
    const cached = await newestCachedDeb(dir, pkg);
    if (cached) return cached;
    const ctx = await aptContext(suite, root);
    if (ctx.privateLists) await aptUpdateOnce(ctx);
    const tmp = await tempDirIn(dir, `.download-${pkg}-`);
    try {
      const download = () => run('apt-get', [...ctx.options, '-q', 'download', pkg], { cwd: tmp, timeoutMs: APT_TIMEOUT_MS });
      try {
        await download();
      } catch (err) {
        const msg = err instanceof CommandError ? err.stderr : String(err);
        const listsProblem = /Unable to locate package|has no installation candidate|Can't select candidate/i.test(msg);
        if (!listsProblem) throw err;
        // The host's lists are only updated when they are empty (a fresh image); a private state
        // may be stale, so it is refreshed. At most once per process either way; then try again.
        if (!ctx.privateLists && (await listsPopulated(await hostListsDir()))) throw err;
        await aptRefreshOnce(ctx);
        await download();
      }
      const debs = (await fs.readdir(tmp)).filter((n) => n.endsWith('.deb'));
      if (debs.length !== 1) throw new Error(`expected one .deb in ${tmp}, found ${JSON.stringify(debs)}`);
      const final = path.join(dir, debs[0]);
      await fs.rename(path.join(tmp, debs[0]), final); // atomic; same content if another process won
      return final;
    } catch (err) {
      throw new Error(`downloading Debian ${suite} package ${pkg} failed: ${(err as Error).message}`);
    } finally {
      await fs.rm(tmp, { recursive: true, force: true });
    }
  });
}

// ---------------------------------------------------------------------------------------------
// git

function gitEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('GIT_')) env[k] = v;
  return {
    ...env,
    GIT_CONFIG_NOSYSTEM: '1',
    GIT_CONFIG_GLOBAL: '/dev/null',
    GIT_TERMINAL_PROMPT: '0',
    GIT_AUTHOR_NAME: COMMIT_NAME,
    GIT_AUTHOR_EMAIL: COMMIT_EMAIL,
    GIT_AUTHOR_DATE: COMMIT_DATE,
    GIT_COMMITTER_NAME: COMMIT_NAME,
    GIT_COMMITTER_EMAIL: COMMIT_EMAIL,
    GIT_COMMITTER_DATE: COMMIT_DATE,
    TZ: 'UTC',
    LC_ALL: 'C',
  };
}

const GIT_CONFIG = [
  '-c',
  'commit.gpgsign=false',
  '-c',
  'core.autocrlf=false',
  '-c',
  'core.safecrlf=false',
  '-c',
  'core.fileMode=true',
  '-c',
  'core.symlinks=true',
  '-c',
  'core.hooksPath=/dev/null',
  '-c',
  'i18n.commitEncoding=UTF-8',
  '-c',
  'safe.directory=*',
];

function git(cwd: string, args: string[]): Promise<RunResult> {
  return run('git', [...GIT_CONFIG, ...args], { cwd, env: gitEnv() });
}

/** HEAD of `dir` if it is the top of a git work tree with no tracked changes; else undefined. */
async function cleanHead(dir: string): Promise<string | undefined> {
  if (!(await exists(path.join(dir, '.git')))) return undefined;
  try {
    const top = (await git(dir, ['rev-parse', '--show-toplevel'])).stdout.trim();
    if (path.resolve(top) !== (await fs.realpath(dir))) return undefined;
    const head = (await git(dir, ['rev-parse', '--verify', 'HEAD^{commit}'])).stdout.trim();
    const dirty = (await git(dir, ['status', '--porcelain', '--untracked-files=no'])).stdout.trim();
    return dirty ? undefined : head;
  } catch {
    return undefined;
  }
}

/** True when `dir` may be replaced: absent, empty, or a checkout this module made. */
async function replaceable(dir: string): Promise<boolean> {
  const entries = await fs.readdir(dir).catch(() => undefined);
  if (!entries || entries.length === 0) return true;
  try {
    const email = (await git(dir, ['log', '-1', '--format=%ae'])).stdout.trim();
    return email === COMMIT_EMAIL;
  } catch {
    return false;
  }
}

// ---------------------------------------------------------------------------------------------
// Layout

/** Resolve a symlink found inside an extracted .deb against the extraction root. */
async function resolveInRoot(root: string, link: string): Promise<string> {
  let current = link;
  for (let hops = 0; hops < 40; hops++) {
    const st = await fs.lstat(current).catch(() => undefined);
    if (!st) throw new Error(`dangling link ${path.relative(root, link)}`);
    if (!st.isSymbolicLink()) return current;
    const target = await fs.readlink(current);
    current = target.startsWith('/') ? path.join(root, target) : path.resolve(path.dirname(current), target);
    if (current !== root && !current.startsWith(root + path.sep)) {
      throw new Error(`link ${path.relative(root, link)} points outside the package`);
    }
  }
  throw new Error(`too many levels of links at ${path.relative(root, link)}`);
}

/**
 * Copy `src` to `dst` preserving modes. A symlink whose target stays inside the copied entry is
 * kept as a link; one that leaves it (Debian sometimes links into /usr/share) is replaced by the
 * content it points to inside the package.
 */
async function copyEntry(root: string, entryRoot: string, src: string, dst: string): Promise<void> {
  const st = await fs.lstat(src);
  if (st.isSymbolicLink()) {
    const target = await fs.readlink(src);
    const resolved = target.startsWith('/') ? path.join(root, target) : path.resolve(path.dirname(src), target);
    if (!target.startsWith('/') && (resolved === entryRoot || resolved.startsWith(entryRoot + path.sep))) {
      await fs.symlink(target, dst);
      return;
    }
    await copyEntry(root, entryRoot, await resolveInRoot(root, src), dst);
    return;
  }
  if (st.isDirectory()) {
    if (path.basename(src) === '__pycache__') return;
    await fs.mkdir(dst, { mode: st.mode & 0o7777 });
    for (const name of (await fs.readdir(src)).sort()) {
      await copyEntry(root, entryRoot, path.join(src, name), path.join(dst, name));
    }
    await fs.chmod(dst, st.mode & 0o7777);
    return;
  }
  if (st.isFile()) {
    await fs.copyFile(src, dst);
    await fs.chmod(dst, st.mode & 0o7777);
    return;
  }
  throw new Error(`unsupported file type at ${path.relative(root, src)}`);
}

async function removePycache(dir: string): Promise<void> {
  for (const ent of await fs.readdir(dir, { withFileTypes: true })) {
    if (!ent.isDirectory()) continue;
    const p = path.join(dir, ent.name);
    if (ent.name === '__pycache__') await fs.rm(p, { recursive: true, force: true });
    else if (ent.name !== '.git') await removePycache(p);
  }
}

/** Lay the project out from `deb` into the new folder `repo` and commit it; returns the SHA. */
async function buildCheckout(project: CorpusProject, deb: string, version: string, repo: string): Promise<string> {
  const extract = await fs.mkdtemp(path.join(os.tmpdir(), `worldline-deb-${project.name}-`));
  try {
    try {
      await run('dpkg-deb', ['-x', deb, extract]);
    } catch (err) {
      throw new Error(`extracting ${project.debPackage} (${deb}) failed: ${(err as Error).message}`);
    }
    const dist = path.join(extract, DIST_PACKAGES);
    for (const entry of project.entries) {
      if (entry.includes('/') || entry === '.' || entry === '..') throw new Error(`bad entry name ${entry}`);
      const src = path.join(dist, entry);
      if (!(await exists(src))) {
        const found = await fs.readdir(dist).catch(() => [] as string[]);
        throw new Error(`${project.debPackage} ${version} has no ${DIST_PACKAGES}/${entry} (it has: ${found.join(', ') || 'nothing'})`);
      }
      await copyEntry(extract, src, src, path.join(repo, entry));
    }
    await removePycache(repo);
    const copyright = path.join(extract, 'usr/share/doc', project.debPackage, 'copyright');
    let copyrightFile: string;
    try {
      copyrightFile = await resolveInRoot(extract, copyright);
    } catch (err) {
      throw new Error(`${project.debPackage} ${version} ships no usr/share/doc/${project.debPackage}/copyright: ${(err as Error).message}`);
    }
    await fs.copyFile(copyrightFile, path.join(repo, 'COPYING'));
    await fs.chmod(path.join(repo, 'COPYING'), 0o644);

    await git(repo, ['init', '-q', '--template=', '-b', 'main']);
    await git(repo, ['add', '-A', '-f', '.']);
    await git(repo, ['commit', '-q', '--no-verify', '--allow-empty-message', '-m', `${project.name} ${version} from Debian ${project.debPackage}`]);
    return (await git(repo, ['rev-parse', 'HEAD'])).stdout.trim();
  } finally {
    await fs.rm(extract, { recursive: true, force: true });
  }
}

function memoFile(root: string, suite: Suite, project: CorpusProject, deb: string): string {
  const key = createHash('sha256')
    .update(JSON.stringify([LAYOUT_VERSION, project.name, project.debPackage, project.entries, path.basename(deb)]))
    .digest('hex')
    .slice(0, 16);
  return path.join(root, 'commits', suite, `${project.name}-${key}.sha`);
}

const materializing = new Map<string, Promise<MaterializedProject>>();

/**
 * Lay out corpus project `name` as a git checkout at `destRoot/<name>` with one reproducible commit,
 * from the suite's Debian binary package (downloaded once into the cache). Returns the checkout's
 * path and commit. An existing checkout of that same commit is returned as is.
 */
export async function materializeProject(
  name: string,
  destRoot: string,
  opts?: { suite?: Suite; cacheDir?: string },
): Promise<{ path: string; commit: string; project: CorpusProject }> {
  const project = Object.hasOwn(CORPUS, name) ? CORPUS[name] : undefined;
  if (!project) throw new Error(`unknown corpus project ${JSON.stringify(name)} (known: ${Object.keys(CORPUS).join(', ')})`);
  const suite: Suite = opts?.suite ?? 'bookworm';
  if (suite !== 'bookworm' && suite !== 'trixie') throw new Error(`unknown Debian suite ${JSON.stringify(suite)}`);
  const root = cacheRoot(opts);
  const dest = path.join(path.resolve(destRoot), name);
  return memo(materializing, `${dest}\0${suite}\0${root}`, async () => {
    const deb = await fetchDeb(project.debPackage, suite, root);
    let version: string;
    try {
      const pkg = await debVersionField(deb, 'Package');
      if (pkg !== project.debPackage) throw new Error(`it is package ${pkg}`);
      version = await debVersionField(deb, 'Version');
    } catch (err) {
      throw new Error(`reading ${project.debPackage} control fields from ${deb} failed: ${(err as Error).message}`);
    }

    const memoPath = memoFile(root, suite, project, deb);
    const known = (await fs.readFile(memoPath, 'utf8').catch(() => '')).trim();
    const existing = await cleanHead(dest);
    if (known && existing === known) return { path: dest, commit: known, project };

    await fs.mkdir(path.dirname(dest), { recursive: true });
    const work = await tempDirIn(path.dirname(dest), `.${name}.tmp-`);
    await fs.chmod(work, 0o755);
    try {
      const commit = await buildCheckout(project, deb, version, work);
      await fs.mkdir(path.dirname(memoPath), { recursive: true });
      const tmpMemo = `${memoPath}.${process.pid}.${randomBytes(4).toString('hex')}`;
      await fs.writeFile(tmpMemo, `${commit}\n`);
      await fs.rename(tmpMemo, memoPath);
      if (existing === commit) return { path: dest, commit, project };
      if (!(await replaceable(dest))) {
        throw new Error(`${dest} exists and is not a corpus checkout; refusing to replace it`);
      }
      await fs.rm(dest, { recursive: true, force: true });
      try {
        await fs.rename(work, dest);
      } catch (err) {
        // Another process may have put the same checkout there first.
        if ((await cleanHead(dest)) !== commit) throw err;
      }
      return { path: dest, commit, project };
    } catch (err) {
      const msg = (err as Error).message;
      throw new Error(msg.includes(project.debPackage) ? msg : `materializing ${name} from ${project.debPackage}: ${msg}`);
    } finally {
      await fs.rm(work, { recursive: true, force: true });
    }
  });
}

/**
 * Materialize several corpus projects under `destRoot` (a few at a time); results follow `names`.
 * Every project is attempted; if any fails, one error lists all the failures.
 */
export async function materializeCorpus(
  names: string[],
  destRoot: string,
  opts?: { suite?: Suite; cacheDir?: string },
): Promise<Array<{ path: string; commit: string; project: CorpusProject }>> {
  const unique = [...new Set(names)];
  const results = new Map<string, PromiseSettledResult<MaterializedProject>>();
  let next = 0;
  const worker = async () => {
    while (next < unique.length) {
      const n = unique[next++];
      try {
        results.set(n, { status: 'fulfilled', value: await materializeProject(n, destRoot, opts) });
      } catch (reason) {
        results.set(n, { status: 'rejected', reason });
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(4, unique.length) }, worker));
  const failures = unique.flatMap((n) => {
    const r = results.get(n)!;
    return r.status === 'rejected' ? [`${n}: ${(r.reason as Error)?.message ?? String(r.reason)}`] : [];
  });
  if (failures.length) throw new Error(`materializing the corpus failed for ${failures.length} project(s):\n${failures.join('\n')}`);
  return names.map((n) => (results.get(n) as PromiseFulfilledResult<MaterializedProject>).value);
}
