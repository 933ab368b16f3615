/**
 * Once per test run: bring up what the tests need when it is missing (the Docker Engine, Chromium
 * for the HTML report test, redis-server for the queue tests, docker-registry for the registry tests: the same scripts .ci/run uses, so
 * `npm test` works alone on a fresh machine), build (or find) the base images, and lay out the real
 * corpus, so every test file shares them. Images and folders this run created are removed at the end; base images are kept on developer machines (a cache) and pruned by .ci/run.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestProject } from 'vitest/node';
import { removeTree } from '../core/mounts.js';
import { packageRoot } from '../core/package.js';
import { ensureBaseImage } from '../pipeline/sandbox/base_images.js';
import { assertDockerUp, removeImage } from '../pipeline/sandbox/engine.js';
import { materializeCorpus } from './corpus.js';

export const CORPUS_NAMES = ['toolz', 'h11', 'isodate', 'hyperlink', 'simplejson'];

declare module 'vitest' {
  export interface ProvidedContext {
    workRoot: string;
    corpusRoot: string;
    base311: string;
    base313: string;
  }
}

let workRoot = '';

export async function setup(project: TestProject): Promise<void> {
  const script = (name: string) => execFileSync('bash', [join(packageRoot, 'scripts', name)], { stdio: ['ignore', 'inherit', 'inherit'] });
  try {
    await assertDockerUp();
  } catch {
    script('setup-docker.sh');
    await assertDockerUp();
  }
  if (!existsSync('/usr/bin/chromium')) script('setup-chromium.sh');
  if (!existsSync('/usr/bin/redis-server')) script('setup-redis.sh');
  if (!existsSync('/usr/bin/docker-registry')) script('setup-registry.sh');
  workRoot = mkdtempSync(join(tmpdir(), 'worldline-test-'));
  const log = (m: string) => process.stderr.write(`[setup] ${m}\n`);
  const [b311, b313] = await Promise.all([ensureBaseImage('3.11', log), ensureBaseImage('3.13', log)]);
  const corpusRoot = join(workRoot, 'corpus');
  await materializeCorpus(CORPUS_NAMES, corpusRoot);
  project.provide('workRoot', workRoot);
  project.provide('corpusRoot', corpusRoot);
  project.provide('base311', b311.ref);
  project.provide('base313', b313.ref);
}

/**
 * The env images the build ledgers under `root` name (every test's output folder lies under the
 * run's work root), then the lock images they stand on (lock_images.ts), which go after them.
 */
function builtUnder(root: string): string[] {
  const images = new Set<string>();
  const locks = new Set<string>();
  for (const entry of readdirSync(root, { recursive: true, withFileTypes: true })) {
    if (!entry.isFile() || !entry.name.endsWith('.json') || !entry.parentPath.endsWith(join('ledger', 'build'))) continue;
    try {
      const record = (JSON.parse(readFileSync(join(entry.parentPath, entry.name), 'utf8')) as { record?: { image?: string; index?: { lock_image?: string } } })
        .record;
      if (record?.image) images.add(record.image);
      if (record?.index?.lock_image) locks.add(record.index.lock_image);
    } catch {
      // A ledger entry a killed test left half-written names nothing.
    }
  }
  return [...images, ...locks];
}

export async function teardown(): Promise<void> {
  if (process.env.WORLDLINE_KEEP_TEST_OUTPUT) return;
  // Env images this run's output folders recorded (base images stay: they are the cache that makes
  // reruns fast). By the ledgers, not by creation time: a test run beside this one on the same
  // engine (another developer's) keeps the images it is still using.
  for (const image of builtUnder(workRoot)) await removeImage(image).catch(() => undefined);
  // A test's run killed mid-container may leave a work disk mounted under it.
  if (workRoot) removeTree(workRoot);
}
