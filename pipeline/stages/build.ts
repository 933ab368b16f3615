/**
 * Stage `build`: one environment image per unit, FROM its base, holding the checkout at /repo
 * (committed once inside the image as the baseline later diffs are taken against) with the
 * manifest's env applied under host networking. Tagged by a hash of base + env + commit, so an
 * unchanged unit is never rebuilt.
 */
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { FIXED_COMMIT_ENV } from '../../core/git.js';
import { hashOf } from '../../core/hashing.js';
import { shQuote } from '../../core/shell.js';
import { outLayout } from '../runtime/layout.js';
import type { UnitEnv } from '../runtime/manifest.js';
import type { BuildRecord } from '../runtime/records.js';
import { failed, ok, requireRecord, type Stage, type StageContext } from '../runtime/stage.js';
import { type BaseImage, resolveBase } from '../sandbox/base_images.js';
import { buildImage, inspectImage, tarStream } from '../sandbox/engine.js';

/** Bump when the Dockerfile below changes shape. */
const BUILD_REVISION = 1;

export function dockerfile(base: BaseImage, env: UnitEnv, srcLayout: boolean, labels: Record<string, string>): string {
  const lines = [`FROM ${base.ref}`, 'COPY repo/ /repo/', 'WORKDIR /repo'];
  if (env.apt.length) {
    lines.push(`RUN apt-get update -qq && apt-get install -y -qq --no-install-recommends ${env.apt.map(shQuote).join(' ')} && rm -rf /var/lib/apt/lists/*`);
  }
  if (env.pip.length) {
    lines.push(
      `RUN python3 -m pip --version >/dev/null 2>&1 || { echo "worldline: env.pip needs pip, which base image ${base.ref} lacks" >&2; exit 1; }; ` +
        `python3 -m pip install --no-cache-dir ${env.pip.map(shQuote).join(' ')}`,
    );
  }
  for (const cmd of env.setup) lines.push(`RUN set -e; ${cmd}`);
  const gitEnv = Object.entries(FIXED_COMMIT_ENV)
    .map(([k, v]) => `${k}=${v}`)
    .join(' ');
  // The baseline commit lets agents and graders diff against the environment as built.
  lines.push(`RUN git init -q && git add -A && ${gitEnv} git -c commit.gpgsign=false commit -q --allow-empty -m "worldline: environment baseline"`);
  if (srcLayout) lines.push('ENV PYTHONPATH=/repo/src');
  lines.push(...Object.entries(labels).map(([k, v]) => `LABEL ${k}=${JSON.stringify(v)}`));
  return lines.join('\n') + '\n';
}

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

    const work = outLayout.work(options.out, 'build', unit.id);
    rmSync(work, { recursive: true, force: true });
    mkdirSync(work, { recursive: true });
    writeFileSync(join(work, 'Dockerfile'), dockerfile(base, unit.env, clone.src_layout, labels));
    const logFile = outLayout.log(options.out, 'build', unit.id);
    mkdirSync(outLayout.logDir(options.out, 'build'), { recursive: true });
    ctx.log(`build ${unit.id}: ${tag}`);
    const checkout = outLayout.checkout(options.out, unit.id);
    const context = tarStream(['-C', work, 'Dockerfile', '-C', checkout, '--transform', 's,^\\./,repo/,;s,^\\.$,repo,', '.']);
    const result = await buildImage({ context, tag, logFile, timeoutMs: options.buildTimeoutS * 1000 });
    rmSync(work, { recursive: true, force: true });
    if (!result.ok || !result.imageId) {
      const tail = tailOf(logFile, 3);
      return failed(`image build failed: ${result.error}${tail && !result.timedOut ? ` (last output: ${tail})` : ''}`);
    }
    return ok(record(result.imageId));
  },
};
