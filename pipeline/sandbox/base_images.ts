/**
 * Base images built offline: debootstrap a minimal Debian with python3, pytest and git, add the
 * tracer's C accelerator compiled for that Python, then `docker import` it. The tag is a hash of the
 * recipe (the accelerator's source included), so an unchanged recipe is never rebuilt.
 * A user with a registry may name any image instead; it is probed for what we need.
 */
import { execFile as execFileCb } from 'node:child_process';
import { copyFileSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { hashOf } from '../../core/hashing.js';
import { withLock } from '../../core/lock.js';
import { cacheDir, debianMirror, machineLock } from '../runtime/layout.js';
import { DEBIAN_SUITES, type DebianSuite, type PythonVersion } from '../runtime/manifest.js';
import { importImage, inspectImage, tarStream } from './engine.js';
import { runContainer } from './sandbox.js';
import { tracersDir } from './tracers.js';

const execFile = promisify(execFileCb);

export interface BaseRecipe {
  suite: DebianSuite;
  python: PythonVersion;
  packages: string[];
  /** Hash of the tracer's C accelerator sources (NATIVE_SOURCES): a changed source rebuilds. */
  native: string;
  /** Bump when the steps below change in a way the fields above do not show. */
  revision: number;
}

const PACKAGES = ['python3', 'python3-pytest', 'python3-pytest-timeout', 'git', 'netbase', 'ca-certificates'];

/** The tracer's C accelerator (tracers/worldline_tracer/native.py loads it, or falls back to pure Python). */
const NATIVE_DIR = join(tracersDir, 'worldline_tracer');
const NATIVE_SOURCES = ['_buf.h', '_native.c', '_episodes.c', 'build_native.py'];
/** What compiling it needs: installed in a throwaway builder rootfs only, so the image stays lean. */
const BUILD_PACKAGES = ['python3', 'python3-dev', 'gcc', 'libc6-dev'];
/** On every Debian python3's sys.path (pytest itself is there); the module's name carries its ABI tag. */
const NATIVE_TARGET = 'usr/lib/python3/dist-packages';
const NATIVE = hashOf(NATIVE_SOURCES.map((f) => [f, readFileSync(join(NATIVE_DIR, f), 'utf8')]));

export const BASE_RECIPES: Record<PythonVersion, BaseRecipe> = {
  '3.9': { suite: DEBIAN_SUITES['3.9'], python: '3.9', packages: PACKAGES, native: NATIVE, revision: 1 },
  '3.11': { suite: DEBIAN_SUITES['3.11'], python: '3.11', packages: PACKAGES, native: NATIVE, revision: 1 },
  '3.13': { suite: DEBIAN_SUITES['3.13'], python: '3.13', packages: PACKAGES, native: NATIVE, revision: 1 },
};

export interface BaseImage {
  /** What env images are built FROM. */
  ref: string;
  imageId: string;
  python: string;
  pytest: string;
  /** Whether pytest-timeout is importable: per-test timeouts need it. */
  pytestTimeout: boolean;
  /** Whether the tracer's C accelerator (_worldline_native and _worldline_episodes) is importable; without it the tracer runs its pure Python. */
  native: boolean;
  /** Whether this is one of ours or a user-named image. */
  source: 'debootstrap' | 'user';
}

export function baseTag(recipe: BaseRecipe): string {
  return `worldline/base:py${recipe.python}-${hashOf(recipe)}`;
}

const PROBE = [
  'import importlib.util, json, sys',
  'out = {"python": sys.version.split()[0]}',
  'try:',
  '    import pytest; out["pytest"] = pytest.__version__',
  'except Exception: out["pytest"] = None',
  'out["pytest_timeout"] = importlib.util.find_spec("pytest_timeout") is not None',
  'try:',
  '    import _worldline_native, _worldline_episodes; out["native"] = True',
  'except Exception: out["native"] = False',
  'print(json.dumps(out))',
].join('\n');

interface Probe {
  python: string;
  pytest: string | null;
  pytest_timeout: boolean;
  native: boolean;
}

function labelsOf(info: { Config?: { Labels?: Record<string, string> | null } }): Record<string, string> {
  return info.Config?.Labels ?? {};
}

/** Ensures our base image for `python` exists, building it when its recipe tag is absent. */
export async function ensureBaseImage(python: PythonVersion, log: (line: string) => void = () => undefined): Promise<BaseImage> {
  const recipe = BASE_RECIPES[python];
  const tag = baseTag(recipe);
  return withLock(machineLock(`base-${python}`), async () => {
    let info = await inspectImage(tag);
    if (!info) {
      log(`building base image ${tag} (debootstrap ${recipe.suite}; about a minute)`);
      await buildBase(recipe, tag);
      info = await inspectImage(tag);
      if (!info) throw new Error(`docker import did not produce ${tag}`);
    }
    const labels = labelsOf(info);
    return {
      ref: tag,
      imageId: info.Id,
      python: labels['worldline.python'],
      pytest: labels['worldline.pytest'],
      pytestTimeout: labels['worldline.pytest_timeout'] === 'true',
      native: labels['worldline.native'] === 'true',
      source: 'debootstrap',
    };
  });
}

async function debootstrap(suite: BaseRecipe['suite'], packages: string[], root: string): Promise<void> {
  rmSync(root, { recursive: true, force: true });
  mkdirSync(root, { recursive: true });
  try {
    await execFile('debootstrap', ['--variant=minbase', `--include=${packages.join(',')}`, suite, root, debianMirror()], {
      maxBuffer: 64 << 20,
    });
  } catch (e) {
    const err = e as { stderr?: string; stdout?: string; message: string };
    const tail = `${err.stdout ?? ''}${err.stderr ?? ''}`.trim().split('\n').slice(-8).join('\n');
    throw new Error(`debootstrap ${suite} failed: ${tail || err.message}`);
  }
}

/**
 * Compiles the accelerator in a builder rootfs of the same suite (so the same Python) and copies
 * the module into `root`: the image gets no compiler, headers or apt state from it.
 */
async function addNative(recipe: BaseRecipe, root: string): Promise<void> {
  const builder = `${root}-native`;
  try {
    await debootstrap(recipe.suite, BUILD_PACKAGES, builder);
    const src = join(builder, 'tmp', 'worldline-native');
    mkdirSync(join(src, 'out'), { recursive: true });
    for (const f of NATIVE_SOURCES) copyFileSync(join(NATIVE_DIR, f), join(src, f));
    const { stdout } = await execFile('chroot', [builder, 'python3', '/tmp/worldline-native/build_native.py', '/tmp/worldline-native/out']);
    // build_native.py prints one path a line: every module it compiled
    mkdirSync(join(root, NATIVE_TARGET), { recursive: true });
    for (const path of stdout.trim().split('\n')) {
      const built = path.split('/').pop() as string;
      copyFileSync(join(src, 'out', built), join(root, NATIVE_TARGET, built));
    }
  } finally {
    rmSync(builder, { recursive: true, force: true });
  }
}

/** The label every base image of ours carries (its recipe's hash): `gc --host-wide --images` finds them by it. */
export const BASE_LABEL = 'worldline.recipe';

async function buildBase(recipe: BaseRecipe, tag: string): Promise<void> {
  const root = join(cacheDir(), 'rootfs', `${recipe.suite}-${hashOf(recipe)}`);
  try {
    await debootstrap(recipe.suite, recipe.packages, root);
    // Keep the mirror list so env builds can apt-get install; drop what only bloats the image.
    writeFileSync(join(root, 'etc/apt/sources.list'), `deb ${debianMirror()} ${recipe.suite} main\n`);
    for (const dir of ['var/cache/apt/archives', 'var/lib/apt/lists']) {
      for (const entry of readdirSync(join(root, dir))) {
        if (entry.endsWith('.deb') || entry.includes('_dists_')) rmSync(join(root, dir, entry), { force: true });
      }
    }
    await addNative(recipe, root);
    const { stdout } = await execFile('chroot', [root, 'python3', '-c', PROBE]);
    const probe = JSON.parse(stdout) as Probe;
    if (!probe.pytest) throw new Error(`base ${recipe.suite}: pytest is not importable after debootstrap`);
    if (!probe.native) throw new Error(`base ${recipe.suite}: the tracer's C accelerator does not import after it was built`);
    const changes = [
      'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin',
      'ENV LANG=C.UTF-8',
      'ENV DEBIAN_FRONTEND=noninteractive',
      `LABEL ${BASE_LABEL}=${hashOf(recipe)}`,
      `LABEL worldline.suite=${recipe.suite}`,
      `LABEL worldline.python=${probe.python}`,
      `LABEL worldline.pytest=${probe.pytest}`,
      `LABEL worldline.pytest_timeout=${probe.pytest_timeout}`,
      `LABEL worldline.native=${probe.native}`,
      'CMD ["python3"]',
    ];
    await importImage(tarStream(['-C', root, '.']), tag, changes);
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
}

/** Probes a user-named image for python3 and pytest, and says exactly what is missing. */
export async function userBaseImage(ref: string): Promise<BaseImage> {
  const info = await inspectImage(ref);
  if (!info) {
    throw new Error(`base image ${ref} is not present locally; pull it (or load it) first: these machines reach no registry`);
  }
  const res = await runContainer({
    image: ref,
    cmd: [
      'sh',
      '-c',
      `command -v python3 >/dev/null || { echo NO_PYTHON3; exit 0; }; python3 -c '${PROBE.replace(/'/g, "'\\''")}'; command -v git >/dev/null || echo NO_GIT`,
    ],
    limits: { memoryBytes: 512 << 20, pids: 64, cpus: 1 },
    timeoutMs: 60_000,
  });
  const missing: string[] = [];
  if (res.output.includes('NO_PYTHON3')) missing.push('python3');
  const line = res.output.split('\n').find((l) => l.startsWith('{'));
  const probe = line ? (JSON.parse(line) as Probe) : null;
  if (probe && !probe.pytest) missing.push('pytest (python3 -m pytest fails to import)');
  if (res.output.includes('NO_GIT')) missing.push('git');
  if (missing.length || !probe) {
    throw new Error(`base image ${ref} lacks what Worldline needs: ${missing.join(', ') || 'a working python3'}`);
  }
  return {
    ref,
    imageId: info.Id,
    python: probe.python,
    pytest: probe.pytest as string,
    pytestTimeout: probe.pytest_timeout,
    native: probe.native,
    source: 'user',
  };
}

const baseCache = new Map<string, Promise<BaseImage>>();

/** The base for a unit, resolved once per process (building ours when absent). */
export function resolveBase(python: PythonVersion, userImage: string | undefined, log: (m: string) => void): Promise<BaseImage> {
  const key = userImage ?? `debootstrap:${python}`;
  let p = baseCache.get(key);
  if (!p) {
    p = userImage ? userBaseImage(userImage) : ensureBaseImage(python, log);
    p.catch(() => baseCache.delete(key));
    baseCache.set(key, p);
  }
  return p;
}
