/**
 * A queue job cancelled at --job-timeout stops its package build: the engine runs that build
 * itself (no container of ours carries the job label to be removed), so the build's request is
 * dropped and the engine stops the step. Real Docker, a build step that would sleep for an hour.
 */
import { execFileSync } from 'node:child_process';
import { randomInt } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, inject, it } from 'vitest';
import { cancelJob, inJob, type JobScope } from '../pipeline/runtime/job_scope.js';
import { buildImage, tarStream } from '../pipeline/sandbox/engine.js';
import { tempDir } from './helpers.js';

/** Whether a container of the engine's is running `sleep N`. */
const sleeping = (n: number) => execFileSync('docker', ['ps', '--no-trunc', '--format', '{{.Command}}'], { encoding: 'utf8' }).includes(`sleep ${n}`);

/** Polls `ok` every half second until it holds; throws after `s` seconds (a hang, not a speed check). */
async function until(ok: () => boolean, what: string, s = 300): Promise<void> {
  for (let i = 0; i < s * 2; i++) {
    if (ok()) return;
    await new Promise((r) => setTimeout(r, 500));
  }
  throw new Error(`still waiting for ${what} after ${s} s`);
}

describe('a cancelled job', () => {
  it('stops its package build', async () => {
    const dir = tempDir('job-build');
    const n = 3600 + randomInt(1000);
    writeFileSync(join(dir, 'Dockerfile'), `FROM ${inject('base311')}\nRUN sleep ${n}\n`);
    const scope: JobScope = { id: `job-build-test#${n}`, cancelled: false };
    const building = inJob(scope, () =>
      buildImage({
        context: () => tarStream(['-C', dir, 'Dockerfile']),
        tag: `worldline/test-job-build:${n}`,
        logFile: join(dir, 'build.log'),
        timeoutMs: 3_600_000,
        memoryBytes: 256 << 20,
        cpus: 1,
      }),
    );
    await until(() => sleeping(n), 'the build step to start');
    cancelJob(scope);
    expect(await building).toMatchObject({ ok: false, error: 'job cancelled: the build was stopped', imageId: null });
    await until(() => !sleeping(n), 'the engine to stop the build step');
    expect(sleeping(n)).toBe(false);
  }, 900_000);
});
