/**
 * Heavy stacks shared by image layers. A torch environment is some 6 GB of wheels (torch, the
 * CUDA libraries, triton) that every project on the same torch locks file for file: committed in
 * each unit's own image, twenty such units are 120 GB of identical bytes. Here the lock's heavy
 * files (each at least `stackMinBytes()`) are installed once per host, per base and per set of
 * files, into an image of their own that the unit's build then starts from, so the engine stores
 * them as one layer under every image that shares them, with their bytecode (bytecode.ts). Built
 * with no network from the host's download cache (the files mounted read-only, as a unit's lock
 * is), under a host-wide lock, so two builds that need the same stack at once build it once.
 */
import { rmSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { hashOf } from '../../core/hashing.js';
import { withLock } from '../../core/lock.js';
import { INDEX_MOUNT, installFolder } from '../envs/index/install.js';
import { indexCacheDir } from '../runtime/layout.js';
import type { LockedDist } from '../runtime/manifest.js';
import type { BaseImage } from './base_images.js';
import { inspectImage } from './engine.js';
import { lockScript } from './lock_images.js';
import { runAndCommit, type SandboxLimits } from './sandbox.js';

/** Marks stack images (gc --host-wide --images removes them with the bases). */
export const STACK_LABEL = 'worldline.stack';

/**
 * A file this large or larger goes to the stack: torch (0.9 GB), the CUDA libraries (0.1-0.7 GB
 * each), triton, jaxlib, tensorflow; not numpy or scipy, whose versions vary more from project to
 * project than they weigh. WORLDLINE_STACK_MIN_BYTES moves the line (tests use small wheels).
 */
export function stackMinBytes(): number {
  const given = Number(process.env.WORLDLINE_STACK_MIN_BYTES);
  return Number.isFinite(given) && given > 0 ? given : 64 << 20;
}

/**
 * The lock split by the size of each file in the cache (`paths`, in the lock's order): the heavy
 * wheels and the rest. An sdist and its build-only wheels stay in the rest: it is built in the
 * unit's own setup, with them beside it.
 */
export function splitHeavy(lock: LockedDist[], paths: string[]): { heavy: number[]; rest: number[] } {
  const min = stackMinBytes();
  const heavy: number[] = [];
  const rest: number[] = [];
  for (const i of lock.keys()) (lock[i].filename.endsWith('.whl') && !lock[i].build_only && statSync(paths[i]).size >= min ? heavy : rest).push(i);
  return { heavy, rest };
}

/**
 * Bump when how a stack is made changes: 2, committed without the build container's
 * NetworkDisabled; 3, with its bytecode in the prefix (bytecode.ts).
 */
const STACK_REVISION = 3;

/** The stack's tag: its base and the heavy files' hashes, so equal stacks are one image per host. */
export function stackTag(base: BaseImage, heavy: LockedDist[]): string {
  return `worldline/stack:py${base.python}-${hashOf({ base: base.imageId, files: heavy.map((d) => d.sha256).sort(), revision: STACK_REVISION })}`;
}

/**
 * The stack image for `heavy` (files at `paths`) on `base`: made now unless this host has it.
 * Throws with uv's last words when the install fails.
 */
export async function stackImage(opts: {
  base: BaseImage;
  heavy: LockedDist[];
  paths: string[];
  uv: string;
  limits: SandboxLimits;
  timeoutMs: number;
  log: (m: string) => void;
}): Promise<{ tag: string; built: boolean }> {
  const tag = stackTag(opts.base, opts.heavy);
  if (await inspectImage(tag)) return { tag, built: false };
  return withLock(join(indexCacheDir(), 'stacks', `${tag.split(':')[1]}.lock`), async () => {
    if (await inspectImage(tag)) return { tag, built: false };
    opts.log(`stack ${tag}: ${opts.heavy.length} heavy file(s) (${opts.heavy.map((d) => `${d.name} ${d.version}`).join(', ')})`);
    const folder = installFolder(opts.heavy, opts.paths, opts.uv);
    const said: Buffer[] = [];
    try {
      const made = await runAndCommit({
        image: opts.base.ref,
        script: lockScript(),
        limits: opts.limits,
        timeoutMs: opts.timeoutMs,
        tag,
        changes: [`LABEL ${STACK_LABEL}=${JSON.stringify(opts.base.imageId)}`],
        onOutput: (chunk) => said.length < 64 && said.push(chunk),
        readOnly: [{ host: folder, at: INDEX_MOUNT }],
      });
      if (!made.imageId) {
        const why = made.timedOut ? 'timed out' : made.oomKilled ? 'ran out of memory' : `exited ${made.exitCode}`;
        const tail = Buffer.concat(said).toString('utf8').trim().split('\n').slice(-2).join(' | ');
        throw new Error(`the heavy stack ${tag} could not be installed: ${why}${tail ? ` (${tail})` : ''}`);
      }
      return { tag, built: true };
    } finally {
      rmSync(folder, { recursive: true, force: true });
    }
  });
}
