/**
 * Stage `build`: one environment image per unit, FROM its base, holding the checkout at /repo
 * (committed once inside the image as the baseline later diffs are taken against) with the
 * manifest's env applied in two phases: the package installs it names on the build network,
 * then everything the repository controls with no network and the run's limits. Tagged by a
 * hash of base + env + commit, so an unchanged unit is never rebuilt.
 */
import { appendFileSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { FIXED_COMMIT_ENV } from '../../core/git.js';
import { hashOf } from '../../core/hashing.js';
import { shQuote } from '../../core/shell.js';
import { outLayout } from '../runtime/layout.js';
import type { UnitEnv } from '../runtime/manifest.js';
import { redactText, unitRedactor } from '../runtime/part_redaction.js';
import type { BuildRecord } from '../runtime/records.js';
import { failed, ok, requireRecord, type Stage, type StageContext } from '../runtime/stage.js';
import { type BaseImage, resolveBase } from '../sandbox/base_images.js';
import { bytecodeScript, PYCACHE_PREFIX } from '../sandbox/bytecode.js';
import { buildImage, inspectImage, removeImage, tarStream } from '../sandbox/engine.js';
import { freshWork, PRISTINE_REPO, runAndCommit, SANDBOX_UID } from '../sandbox/sandbox.js';

/** Bump when the Dockerfile below changes shape. */
const BUILD_REVISION = 6;

/**
 * Phase 1, the package installs the manifest names (apt, pip): the only steps with network, on
 * the build network (no host loopback). Null when there are none.
 */
export function packagesDockerfile(base: BaseImage, env: UnitEnv): string | null {
  if (!env.apt.length && !env.pip.length) return null;
  const lines = [`FROM ${base.ref}`];
  if (env.apt.length) {
    lines.push(`RUN apt-get update -qq && apt-get install -y -qq --no-install-recommends ${env.apt.map(shQuote).join(' ')} && rm -rf /var/lib/apt/lists/*`);
  }
  if (env.pip.length) {
    lines.push(
      `RUN python3 -m pip --version >/dev/null 2>&1 || { echo "worldline: env.pip needs pip, which base image ${base.ref} lacks" >&2; exit 1; }; ` +
        `python3 -m pip install --no-cache-dir ${env.pip.map(shQuote).join(' ')}`,
    );
  }
  return lines.join('\n') + '\n';
}

/**
 * Phase 2, what the repository controls: its setup steps (each its own shell, stopping at the
 * first failure), run without network in a limited container (runAndCommit); then the baseline
 * commit agents and graders diff against, and the checkout the sandbox user owns, which each
 * container copies into its own writable /repo (pipeline/sandbox/sandbox.ts); then the image's
 * bytecode (pipeline/sandbox/bytecode.ts).
 */
export function setupScript(env: UnitEnv, srcLayout: boolean): string {
  const gitEnv = Object.entries(FIXED_COMMIT_ENV)
    .map(([k, v]) => `${k}=${v}`)
    .join(' ');
  return [
    'set -e',
    'cd /repo',
    ...env.setup.map(
      (cmd, i) => `sh -ec ${shQuote(cmd)} || { code=$?; echo "worldline: setup step ${i + 1} returned a non-zero code: $code" >&2; exit $code; }`,
    ),
    `git init -q && git add -A && ${gitEnv} git -c commit.gpgsign=false commit -q --allow-empty -m "worldline: environment baseline"`,
    `echo 'worldline:x:${SANDBOX_UID}:${SANDBOX_UID}:worldline:/tmp:/bin/sh' >> /etc/passwd && echo 'worldline:x:${SANDBOX_UID}:' >> /etc/group`,
    `mkdir -p ${dirname(PRISTINE_REPO)} && cp -a /repo ${PRISTINE_REPO} && chown -R ${SANDBOX_UID}:${SANDBOX_UID} ${PRISTINE_REPO}`,
    ...bytecodeScript(srcLayout),
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

export const buildStage: Stage<'build'> = {
  name: 'build',
  async key(ctx) {
    const clone = requireRecord(ctx, 'clone');
    const base = await resolveBase(ctx.unit.python, ctx.options.baseImage, ctx.log);
    const { apt, pip, setup } = ctx.unit.env;
    return { base: base.imageId, env: { apt, pip, setup }, commit: clone.commit, src: clone.src_layout, revision: BUILD_REVISION };
  },
  // An image removed since (--image-budget, gc) or never built on this host is built again.
  async present(_ctx: StageContext, record: BuildRecord) {
    return (await inspectImage(record.image)) !== null;
  },
  async run(ctx: StageContext) {
    const { unit, options } = ctx;
    const clone = requireRecord(ctx, 'clone');
    const base = await resolveBase(unit.python, options.baseImage, ctx.log);
    const tag = envTag(unit.slug, hashOf(await buildStage.key(ctx)));
    const labels = {
      // Whose Python our processes run on in this image's containers (pipeline/sandbox/our_python.ts): never the build's.
      'worldline.base': base.imageId,
      'worldline.unit': unit.id,
      'worldline.commit': clone.commit,
      'worldline.python': base.python,
      'worldline.pytest': base.pytest,
    };
    const record = (imageId: string): BuildRecord => ({
      image: tag,
      image_id: imageId,
      base: base.ref,
      python_version: base.python,
      pytest_version: base.pytest,
      pytest_timeout: base.pytestTimeout,
    });
    // Same key, same image: a tag already present (built for another output folder) is reused.
    const existing = await inspectImage(tag);
    if (existing) return ok(record(existing.Id));

    const logFile = outLayout.log(options.out, 'build', unit.id);
    mkdirSync(outLayout.logDir(options.out, 'build'), { recursive: true });
    writeFileSync(logFile, '');
    ctx.log(`build ${unit.id}: ${tag}`);
    const deadline = Date.now() + options.buildTimeoutS * 1000;
    let from = base.ref;
    const packages = packagesDockerfile(base, unit.env);
    if (packages) {
      const work = freshWork(outLayout.work(options.out, 'build', unit.id));
      writeFileSync(join(work, 'Dockerfile'), packages);
      const deps = `${tag}-packages`;
      const result = await buildImage({
        context: () => tarStream(['-C', work, 'Dockerfile']),
        tag: deps,
        logFile,
        timeoutMs: deadline - Date.now(),
        memoryBytes: options.memoryMb << 20,
        cpus: options.cpus,
      }).finally(() => rmSync(work, { recursive: true, force: true }));
      if (!result.ok || !result.imageId) {
        const tail = tailOf(logFile, 3);
        return failed(`image build failed: ${result.error}${tail && !result.timedOut ? ` (last output: ${tail})` : ''}`);
      }
      from = result.imageId;
    }
    const checkout = outLayout.checkout(options.out, unit.id);
    let logged = 0;
    let dropped = 0;
    // Repository-controlled output: held (capped) in memory and redacted before it reaches the disk.
    const setupLog: Buffer[] = [];
    const setup = await runAndCommit({
      image: from,
      checkout,
      script: setupScript(unit.env, clone.src_layout),
      limits: options,
      timeoutMs: Math.max(1000, deadline - Date.now()),
      tag,
      changes: imageChanges(clone.src_layout, labels),
      onOutput: (chunk) => {
        const keep = chunk.subarray(0, Math.max(0, SETUP_LOG_CAP - logged));
        setupLog.push(keep);
        logged += keep.length;
        dropped += chunk.length - keep.length;
      },
    });
    appendFileSync(logFile, redactText(unitRedactor(options, unit), Buffer.concat(setupLog).toString('utf8')));
    if (dropped) appendFileSync(logFile, `[worldline: ${dropped} more bytes of setup output dropped]\n`);
    if (packages) await removeImage(`${tag}-packages`);
    if (!setup.imageId) {
      const why = setup.timedOut
        ? `build exceeded its timeout of ${options.buildTimeoutS} s`
        : setup.oomKilled
          ? `setup ran out of memory (killed at the ${options.memoryMb} MB limit)`
          : `setup returned a non-zero code: ${setup.exitCode}`;
      const tail = tailOf(logFile, 3);
      return failed(`image build failed: ${why}${tail && !setup.timedOut ? ` (last output: ${tail})` : ''}`);
    }
    return ok(record(setup.imageId));
  },
};
