/**
 * Stage `build`: one environment image per unit, FROM its base, holding the checkout at /repo
 * (committed once inside the image as the baseline later diffs are taken against) with the
 * manifest's env applied in two phases: the package installs it names on the build network,
 * then everything the repository controls with no network and the run's limits, starting with the
 * unit's lock from the Python index, installed from the host's cache (pipeline/envs/index/). Tagged
 * by a hash of base + env + commit, so an unchanged unit is never rebuilt.
 */
import { appendFileSync, cpSync, existsSync, mkdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { writeFileAtomic } from '../../core/atomic.js';
import { FIXED_COMMIT_ENV } from '../../core/git.js';
import { hashOf } from '../../core/hashing.js';
import { shQuote } from '../../core/shell.js';
import { fetchLocked } from '../envs/index/download.js';
import { INDEX_MOUNT, installFolder, SDIST_MARK } from '../envs/index/install.js';
import { indexSettings } from '../envs/index/settings.js';
import { uvBinary } from '../envs/index/uv.js';
import { installCommand } from '../envs/plan/install_plan.js';
import type { IndexRepair } from '../envs/repair/index.js';
import { settleEnv } from '../envs/repair/loop.js';
import { BudgetSpent } from '../runtime/budgets.js';
import { engineWentAway } from '../runtime/job_scope.js';
import { buildOutputPath, outLayout } from '../runtime/layout.js';
import type { LockedDist, PythonVersion, UnitEnv } from '../runtime/manifest.js';
import { redactText, unitRedactor } from '../runtime/part_redaction.js';
import type { BuildRecord, InstallPlan, ResolveRecord } from '../runtime/records.js';
import { failed, ok, requireRecord, type Stage, type StageContext } from '../runtime/stage.js';
import { type BaseImage, resolveBase } from '../sandbox/base_images.js';
import { bytecodeScript, COLLECT_MARKS, PYCACHE_PREFIX } from '../sandbox/bytecode.js';
import { buildImage, engineFault, inspectImage, removeImage, tarStream } from '../sandbox/engine.js';
import { buildNeeds, diskShort, engineDiskFree } from '../sandbox/engine_disk.js';
import { LOCK_LABEL, lockScript, lockTag, withLockImage } from '../sandbox/lock_images.js';
import { firstErrorLine } from '../sandbox/pytest_output.js';
import { freshWork, PRISTINE_REPO, runAndCommit, SANDBOX_UID } from '../sandbox/sandbox.js';
import { splitHeavy, stackImage, stackTag } from '../sandbox/stack_images.js';

/** Bump when the Dockerfile below or the setup script changes shape (an image of the old shape is not reused). */
const BUILD_REVISION = 9;

/** A package index given as a folder of wheels goes into the package build's context here. */
const WHEELS = 'wheels';
/** Each distribution pip installed, as `pip freeze` writes it, prefixed so the build log shows what came from the index. */
const PIP_MARK = 'worldline-pip: ';

/**
 * Phase 1, the package installs the environment names (apt, and a manifest's own pip): the only
 * steps with network, on the build network (no host loopback). pip takes `pipIndex` when it names
 * one (a URL: its simple index; a folder: its wheels, copied into the build, no other index), and
 * what it installed is printed for the record (PIP_MARK). Null when there are no packages.
 */
export function packagesDockerfile(base: BaseImage, env: UnitEnv, pipIndex?: string, from = base.ref): string | null {
  if (!env.apt.length && !env.pip.length) return null;
  const lines = [`FROM ${from}`];
  if (env.apt.length) {
    lines.push(`RUN apt-get update -qq && apt-get install -y -qq --no-install-recommends ${env.apt.map(shQuote).join(' ')} && rm -rf /var/lib/apt/lists/*`);
  }
  if (env.pip.length) {
    const given = pipIndex === 'auto' ? undefined : pipIndex;
    const folder = given !== undefined && !/^[a-z][a-z0-9+.-]*:\/\//i.test(given);
    const index = given === undefined ? '' : folder ? `--no-index --find-links /tmp/${WHEELS}` : `--index-url ${shQuote(given)}`;
    if (folder) lines.push(`COPY ${WHEELS} /tmp/${WHEELS}`);
    lines.push(
      // Debian marks its Python externally managed; older pips ignore the variable that says we know.
      `RUN python3 -m pip --version >/dev/null 2>&1 || { echo "worldline: env.pip needs pip, which base image ${base.ref} lacks" >&2; exit 1; }; ` +
        `PIP_BREAK_SYSTEM_PACKAGES=1 python3 -m pip install --no-cache-dir ${index} ${env.pip.map(shQuote).join(' ')}` +
        ` && python3 -m pip freeze | sed 's/^/${PIP_MARK}/'${folder ? ` && rm -rf /tmp/${WHEELS}` : ''}`,
    );
  }
  return lines.join('\n') + '\n';
}

/**
 * Phase 2, what the repository controls (its lock is installed below it: stack_images.ts,
 * lock_images.ts): its setup steps (each its own shell, stopping at the first failure), then,
 * for an inferred environment, the project itself (worldline_install.py, from the install plan
 * resolve made), run without network in a limited container
 * (runAndCommit); then the baseline commit agents and graders diff against, and the checkout the
 * sandbox user owns, which each container copies into its own writable /repo
 * (pipeline/sandbox/sandbox.ts); then the image's bytecode and a collect-only run
 * (pipeline/sandbox/bytecode.ts).
 */
export function setupScript(env: UnitEnv, srcLayout: boolean, install: InstallPlan | null = null): string {
  const gitEnv = Object.entries(FIXED_COMMIT_ENV)
    .map(([k, v]) => `${k}=${v}`)
    .join(' ');
  return [
    'set -e',
    'cd /repo',
    ...env.setup.map(
      (cmd, i) => `sh -ec ${shQuote(cmd)} || { code=$?; echo "worldline: setup step ${i + 1} returned a non-zero code: $code" >&2; exit $code; }`,
    ),
    ...(install ? [`echo "${INSTALL_MARK}$(${installCommand(install)})"`] : []),
    `git init -q && git add -A && ${gitEnv} git -c commit.gpgsign=false commit -q --allow-empty -m "worldline: environment baseline"`,
    `echo 'worldline:x:${SANDBOX_UID}:${SANDBOX_UID}:worldline:/tmp:/bin/sh' >> /etc/passwd && echo 'worldline:x:${SANDBOX_UID}:' >> /etc/group`,
    `mkdir -p ${dirname(PRISTINE_REPO)} && cp -a /repo ${PRISTINE_REPO} && chown -R ${SANDBOX_UID}:${SANDBOX_UID} ${PRISTINE_REPO}`,
    ...bytecodeScript(srcLayout, env.pytest_args, env.vars),
    '',
  ].join('\n');
}

/** What the committed image says about itself (runAndCommit's Dockerfile-style changes). */
function imageChanges(srcLayout: boolean, labels: Record<string, string>): string[] {
  return [
    'WORKDIR /repo',
    'CMD ["python3"]',
    `ENV PYTHONPYCACHEPREFIX=${PYCACHE_PREFIX}`,
    ...(srcLayout ? ['ENV PYTHONPATH=/repo/src'] : []),
    ...Object.entries(labels).map(([k, v]) => `LABEL ${k}=${JSON.stringify(v)}`),
  ];
}

/** The build log keeps this much of phase 2's output; the rest is counted. */
const SETUP_LOG_CAP = 4 << 20;

function tailOf(file: string, n: number): string {
  try {
    return readFileSync(file, 'utf8').trim().split('\n').slice(-n).join(' | ');
  } catch {
    return '';
  }
}

export function envTag(slug: string, hash: string): string {
  return `worldline/env:${slug.slice(0, 80)}-${hash}`;
}

/** The build's output line carrying worldline_install.py's answer. */
const INSTALL_MARK = 'worldline-install: ';

/** The environment a build starts from: what resolve recorded (a manifest's own env, or an inferred one), else the manifest's. */
function startOf(ctx: StageContext): { env: UnitEnv; python: PythonVersion; inferred: boolean; install: InstallPlan | null; key: string | null } {
  const resolved = ctx.ledger.get<ResolveRecord>('resolve', ctx.unit.id);
  if (resolved?.status === 'ok' && resolved.record) {
    const r = resolved.record;
    return { env: r.env ?? ctx.unit.env, python: r.python, inferred: r.source === 'inferred', install: r.install, key: r.key };
  }
  return { env: ctx.unit.env, python: ctx.unit.python, inferred: false, install: null, key: null };
}

/** The unit's Python index for the repair loop: the run's, as of the cut-off the unit was resolved at (none without one). */
function indexRepairOf(ctx: StageContext): IndexRepair | undefined {
  const cutoff = ctx.ledger.get<ResolveRecord>('resolve', ctx.unit.id)?.record?.index?.exclude_newer;
  const settings = ctx.options.pipIndex ? indexSettings(ctx.options.pipIndex) : null;
  return settings && cutoff ? { settings, excludeNewer: cutoff, uv: () => uvBinary(ctx.log), log: ctx.log } : undefined;
}

/** What one image build said: its record, or why it failed; the collect-only run's output and status; the install's answer. */
interface Built {
  record?: BuildRecord;
  failure?: string;
  /** The failure was the engine's (engine.ts `engineFault`), not the environment's: worth one more try without the build cache. */
  engineFault?: boolean;
  collect: { output: string; exitCode: number | null };
  install: BuildRecord['install'];
}

/** A build that stopped, with its reason. */
type Unbuilt = Built & { failure: string };

/** What pip installed, from a build's output (packagesDockerfile's PIP_MARK lines). */
const pipLines = (output: string) =>
  output
    .split('\n')
    .filter((l) => l.startsWith(PIP_MARK))
    .map((l) => l.slice(PIP_MARK.length).trim());

/** The sdists of the lock that did not build, from a build's output (install.ts's SDIST_MARK lines). */
const sdistsNotBuilt = (output: string) =>
  output
    .split('\n')
    .filter((l) => l.startsWith(SDIST_MARK))
    .map((l) => l.slice(SDIST_MARK.length).trim());

/** The collect-only run's output and exit status, from the build's output (bytecode.ts's marks). */
function collectOf(output: string): Built['collect'] {
  const start = output.lastIndexOf(COLLECT_MARKS.start);
  const end = output.lastIndexOf(COLLECT_MARKS.end);
  if (start === -1 || end < start) return { output: '', exitCode: null };
  return { output: output.slice(start + COLLECT_MARKS.start.length, end), exitCode: Number.parseInt(output.slice(end + COLLECT_MARKS.end.length), 10) };
}

function installOf(output: string): Built['install'] {
  const line = output.split('\n').find((l) => l.startsWith(INSTALL_MARK));
  try {
    return line ? (JSON.parse(line.slice(INSTALL_MARK.length)) as Built['install']) : null;
  } catch {
    return null;
  }
}

/** One environment image for `env` on `python`'s base: the package phase, then the repository's (see the top of this file). */
async function buildOnce(ctx: StageContext, env: UnitEnv, python: PythonVersion, install: InstallPlan | null, noCache: boolean): Promise<Built> {
  const { unit, options } = ctx;
  const clone = requireRecord(ctx, 'clone');
  const base = await resolveBase(python, options.baseImage, ctx.log);
  const tag = envTag(unit.slug, hashOf({ key: await buildStage.key(ctx), env, python, install }));
  const labels = {
    // Whose Python our processes run on in this image's containers (pipeline/sandbox/our_python.ts): never the build's.
    'worldline.base': base.imageId,
    'worldline.unit': unit.id,
    'worldline.commit': clone.commit,
    'worldline.python': base.python,
    'worldline.pytest': base.pytest,
  };
  let pipInstalled: string[] = [];
  let fromIndex: BuildRecord['index'];
  let notBuilt: string[] = [];
  const record = (imageId: string): BuildRecord => ({
    image: tag,
    image_id: imageId,
    base: base.ref,
    python_version: base.python,
    pytest_version: base.pytest,
    pytest_timeout: base.pytestTimeout,
    ...(pipInstalled.length ? { pip_installed: pipInstalled } : {}),
    ...(fromIndex ? { index: { ...fromIndex, ...(notBuilt.length ? { sdists_not_built: notBuilt } : {}) } } : {}),
  });
  const logFile = outLayout.log(options.out, 'build', unit.id);
  // Same key, same image: a tag already present (built for another output folder) is reused, and
  // what its build said is kept by tag (the unit's own log may hold another try's build).
  const existing = await inspectImage(tag);
  if (existing) {
    const kept = buildOutputPath(tag);
    const said = existsSync(kept) ? readFileSync(kept, 'utf8') : '';
    pipInstalled = pipLines(said);
    notBuilt = sdistsNotBuilt(said);
    return { record: record(existing.Id), collect: collectOf(said), install: installOf(said) };
  }
  mkdirSync(outLayout.logDir(options.out, 'build'), { recursive: true });
  writeFileSync(logFile, '');
  ctx.log(`build ${unit.id}: ${tag}`);
  const deadline = Date.now() + options.buildTimeoutS * 1000;
  const none = { collect: { output: '', exitCode: null }, install: null };
  // The lock's files, on the host: into the host's cache (once per host); its heavy files become
  // (or are found as) a stack image shared by every unit that locks them; the rest, with the
  // packages step, a lock image (made or found) the setup starts from.
  let from = base.ref;
  let rest: { lock: LockedDist[]; paths: string[] } = { lock: [], paths: [] };
  if (env.lock?.length) {
    const settings = indexSettings(options.pipIndex ?? 'auto');
    try {
      const fetched = await fetchLocked(env.lock, { cert: settings?.cert ?? null, proxy: settings?.proxy ?? null });
      const uv = await uvBinary(ctx.log);
      const split = splitHeavy(env.lock, fetched.paths);
      const pick = (ix: number[]) => ({ lock: ix.map((i) => env.lock![i]), paths: ix.map((i) => fetched.paths[i]) });
      rest = pick(split.rest);
      const heavy = pick(split.heavy);
      const stackThere = heavy.lock.length > 0 && (await inspectImage(stackTag(base, heavy.lock))) !== null;
      await checkEngineDisk([...rest.paths, ...(stackThere ? [] : heavy.paths)].reduce((n, p) => n + statSync(p).size, 0));
      const stack = heavy.lock.length
        ? await stackImage({ base, heavy: heavy.lock, paths: heavy.paths, uv, limits: options, timeoutMs: deadline - Date.now(), log: ctx.log })
        : null;
      if (stack) from = stack.tag;
      // `lock`: the line's own lock, fetched (when not cached) with this host's trust, no index consulted.
      fromIndex = {
        mode: (options.pipIndex && settings?.mode) || 'lock',
        files: env.lock.length,
        downloaded: fetched.downloaded,
        downloaded_bytes: fetched.downloadedBytes,
        cached: fetched.cached,
        ...(stack ? { stack: stack.tag, stack_files: heavy.lock.length, stack_built: stack.built } : {}),
      };
      ctx.log(
        `build ${unit.id}: ${env.lock.length} file(s) from the Python index, ${fetched.downloaded} downloaded, ${fetched.cached} from this host's cache` +
          (stack ? `; ${heavy.lock.length} heavy in ${stack.tag}${stack.built ? ' (built now)' : ''}` : ''),
      );
    } catch (e) {
      if (e instanceof BudgetSpent) throw e;
      return { failure: `the Python index's files: ${(e as Error).message}`, ...none };
    }
  } else await checkEngineDisk(0);
  const packages = packagesDockerfile(base, env, options.pipIndex, from);
  let packagesTag: string | null = null;
  /** The packages step (Debian's packages, a manifest's pip list): `from` becomes its image. */
  const packagesImage = async (): Promise<Unbuilt | null> => {
    if (!packages) return null;
    const work = freshWork(outLayout.work(options.out, 'build', unit.id));
    writeFileSync(join(work, 'Dockerfile'), packages);
    const wheels = packages.includes(`COPY ${WHEELS} `);
    if (wheels) cpSync(options.pipIndex!, join(work, WHEELS), { recursive: true });
    const result = await buildImage({
      context: () => tarStream(['-C', work, 'Dockerfile', ...(wheels ? [WHEELS] : [])]),
      tag: `${tag}-packages`,
      logFile,
      timeoutMs: deadline - Date.now(),
      memoryBytes: options.memoryMb << 20,
      cpus: options.cpus,
      noCache,
    }).finally(() => rmSync(work, { recursive: true, force: true }));
    if (!result.ok || !result.imageId) {
      const tail = tailOf(logFile, 3);
      return {
        failure: `image build failed: ${result.error}${tail && !result.timedOut ? ` (last output: ${tail})` : ''}`,
        engineFault: engineFault(result.error),
        ...none,
      };
    }
    from = result.imageId;
    packagesTag = `${tag}-packages`;
    return null;
  };
  const step = (opts: CommittedStep) => committedStep(ctx, logFile, { ...opts, timeoutMs: Math.max(1000, deadline - Date.now()) });
  if (rest.lock.length) {
    // The packages step and the lock's files below the stack, made once per host (lock_images.ts):
    // found, this build installs nothing and its log starts with what the making said.
    const lockImage = lockTag(base.python, from, packages, rest.lock);
    const made = await withLockImage(lockImage, async (): Promise<Unbuilt | { built: boolean }> => {
      const kept = buildOutputPath(lockImage);
      if (!noCache && existsSync(kept) && (await inspectImage(lockImage))) {
        appendFileSync(logFile, readFileSync(kept, 'utf8'));
        return { built: false };
      }
      const unmade = await packagesImage();
      if (unmade) return unmade;
      const folder = installFolder(rest.lock, rest.paths, await uvBinary(ctx.log));
      const installed = await step({
        what: "the lock's install",
        image: from,
        script: lockScript(),
        tag: lockImage,
        changes: [`LABEL ${LOCK_LABEL}=${JSON.stringify(base.imageId)}`],
        readOnly: [{ host: folder, at: INDEX_MOUNT }],
      }).finally(() => rmSync(folder, { recursive: true, force: true }));
      if ('failure' in installed) return installed;
      writeFileAtomic(kept, readFileSync(logFile, 'utf8'));
      return { built: true };
    });
    if ('failure' in made) {
      if (packagesTag) await removeImage(packagesTag);
      return made;
    }
    from = lockImage;
    fromIndex = { ...fromIndex!, lock_image: lockImage, lock_image_built: made.built };
  } else {
    const unmade = await packagesImage();
    if (unmade) return unmade;
  }
  pipInstalled = pipLines(readFileSync(logFile, 'utf8'));
  // The package image may be gone by now (removed under this build by another's): the engine's fault, not the setup's.
  const setup = await step({
    what: 'setup',
    image: from,
    checkout: outLayout.checkout(options.out, unit.id),
    script: setupScript(env, clone.src_layout, install),
    tag,
    changes: imageChanges(clone.src_layout, labels),
  });
  if (packagesTag) await removeImage(packagesTag);
  if ('failure' in setup) return setup;
  const said = readFileSync(logFile, 'utf8');
  notBuilt = sdistsNotBuilt(said);
  if (notBuilt.length) ctx.log(`build ${unit.id}: left out, their sdists did not build (the log says why): ${notBuilt.join(', ')}`);
  writeFileAtomic(buildOutputPath(tag), said);
  // The redacted output, as the reused-image path reads it: problems from it reach the ledger and a model's prompt.
  return { record: record(setup.imageId), collect: collectOf(setup.said), install: installOf(setup.said) };
}

type CommittedStep = Omit<Parameters<typeof runAndCommit>[0], 'limits' | 'timeoutMs' | 'onOutput'> & { what: string };

/**
 * One committed step of a build (runAndCommit as root, no network): its output, which the
 * repository controls, held capped in memory and redacted before it reaches the unit's log; a
 * failure as the unit's reason, naming the step.
 */
async function committedStep(
  ctx: StageContext,
  logFile: string,
  { what, ...opts }: CommittedStep & { timeoutMs: number },
): Promise<Unbuilt | { imageId: string; said: string }> {
  const { options, unit } = ctx;
  const none = { collect: { output: '', exitCode: null }, install: null };
  let logged = 0;
  let dropped = 0;
  const output: Buffer[] = [];
  const ran = await runAndCommit({
    ...opts,
    limits: options,
    onOutput: (chunk) => {
      const keep = chunk.subarray(0, Math.max(0, SETUP_LOG_CAP - logged));
      output.push(keep);
      logged += keep.length;
      dropped += chunk.length - keep.length;
    },
  }).catch((e: Error) => {
    if (!engineFault(e.message)) throw e;
    return { failure: e.message };
  });
  if ('failure' in ran) return { failure: `image build failed: ${ran.failure}`, engineFault: true, ...none };
  const said = redactText(unitRedactor(options, unit), Buffer.concat(output).toString('utf8'));
  appendFileSync(logFile, said);
  if (dropped) appendFileSync(logFile, `[worldline: ${dropped} more bytes of ${what} output dropped]\n`);
  if (!ran.imageId) {
    const why = ran.timedOut
      ? `build exceeded its timeout of ${options.buildTimeoutS} s`
      : ran.oomKilled
        ? `${what} ran out of memory (killed at the ${options.memoryMb} MB limit)`
        : `${what} returned a non-zero code: ${ran.exitCode}`;
    const tail = tailOf(logFile, 3);
    return { failure: `image build failed: ${why}${tail && !ran.timedOut ? ` (last output: ${tail})` : ''}`, ...none };
  }
  return { imageId: ran.imageId, said };
}

/**
 * Stops a build before its first layer when the engine's disk cannot hold what it will write
 * (`wheelBytes` of wheels no image here holds yet): recorded as a cut budget, so the next run,
 * with space freed, builds the unit (engine_disk.ts).
 */
async function checkEngineDisk(wheelBytes: number): Promise<void> {
  const disk = await engineDiskFree();
  const short = disk && diskShort(buildNeeds(wheelBytes), disk.free, disk.path);
  if (short) throw new BudgetSpent(short);
}

/**
 * One image build, tried once more without the build cache when the engine failed it (a cached
 * layer gone, the build network missing or doubled): a unit is not failed for the engine's fault
 * alone. A second engine fault is the engine's too: the unit is not recorded (job_scope.ts), so the
 * next run builds it again.
 */
async function buildWithRetry(ctx: StageContext, env: UnitEnv, python: PythonVersion, install: InstallPlan | null): Promise<Built> {
  const first = await buildOnce(ctx, env, python, install, false);
  if (!first.engineFault) return first;
  ctx.log(`build ${ctx.unit.id}: the engine failed the build (${first.failure}); trying once more without the build cache`);
  const again = await buildOnce(ctx, env, python, install, true);
  if (again.engineFault) engineWentAway(`a build failed twice on the engine's fault: ${again.failure}`);
  return again.failure
    ? { ...again, failure: `${again.failure} (the second try, without the build cache; the first failed on the engine: ${first.failure})` }
    : again;
}

export const buildStage: Stage<'build'> = {
  name: 'build',
  async key(ctx) {
    const clone = requireRecord(ctx, 'clone');
    const start = startOf(ctx);
    const base = await resolveBase(start.python, ctx.options.baseImage, ctx.log);
    const { apt, pip, setup, pytest_args, vars, lock } = start.env;
    return {
      base: base.imageId,
      env: { apt, pip, setup, lock: lock ?? [] },
      // The image's collect-only run (its rewritten tests, what repairs read) runs with these.
      collect: { pytest_args, vars },
      install: start.install,
      repairs: start.inferred,
      commit: clone.commit,
      src: clone.src_layout,
      revision: BUILD_REVISION,
    };
  },
  // An image removed since (--image-budget, gc) or never built on this host is built again.
  async present(_ctx: StageContext, record: BuildRecord) {
    return (await inspectImage(record.image)) !== null;
  },
  /**
   * A manifest's env is built as written; an inferred one is built until it collects, its changes
   * decided by the repair loop (envs/repair/loop.ts): this stage builds the images, envs/ decides
   * the environment.
   */
  async run(ctx: StageContext) {
    const start = startOf(ctx);
    const settled = await settleEnv<Built>(
      start,
      {
        unit: ctx.unit,
        options: ctx.options,
        inferred: start.inferred,
        key: start.key,
        commit: () => requireRecord(ctx, 'clone').commit,
        firstErrorLine,
        log: ctx.log,
        index: indexRepairOf(ctx),
      },
      async (env, python) => {
        const built = await buildWithRetry(ctx, env, python, start.install);
        return built.record ? { built, collect: built.collect } : { failure: built.failure! };
      },
      (built) => removeImage(built.record!.image),
    );
    if ('failure' in settled) return failed(settled.failure);
    const { built, env, python, source, attempts } = settled;
    // A manifest's own env stays the manifest's: its variables (secrets, maybe) stay out of the ledger.
    return ok<BuildRecord>({
      ...built.record!,
      ...(source === 'manifest' ? {} : { env }),
      python,
      apt: env.apt,
      env_source: source,
      attempts,
      install: built.install,
    });
  },
};
