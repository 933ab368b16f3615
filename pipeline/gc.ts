/**
 * `worldline gc --out OUT`: frees what runs over an output folder left on this host: scratch work
 * folders (a killed run's work disks detached first), temporary files of dead writers, dataset
 * versions that are neither published nor being written (the shard lock), the containers of dead
 * Worldline processes that worked for this folder (`--host-wide`: for any folder), and with
 * `--images` the env images its units built (build runs again where a later stage needs one). With
 * `--host-wide`, also the engine-wide resources every run shares: the build network when no build
 * uses it, and with `--images` the base images (each made again on first use). The ledger, part
 * files and the published dataset are kept. Run it when no run or worker is writing
 * to OUT (work folders are in use then).
 */
import { dirBytes } from '../core/disk.js';
import { removeTree } from '../core/mounts.js';
import { pruneUnpublished } from '../datasets/dataset_writer.js';
import { outIdentity } from './runtime/job_scope.js';
import { outLayout } from './runtime/layout.js';
import { Ledger } from './runtime/ledger.js';
import { removeDeadTemps } from './runtime/leftovers.js';
import type { BuildRecord } from './runtime/records.js';
import { BASE_LABEL } from './sandbox/base_images.js';
import { imagesLabelled, inspectImage, removeBuildNetworks, removeImage, removeOrphanContainers } from './sandbox/engine.js';
import { LOCK_LABEL } from './sandbox/lock_images.js';
import { STACK_LABEL } from './sandbox/stack_images.js';

export interface GcReport {
  work_bytes: number;
  temps_removed: number;
  versions_removed: string[];
  containers_removed: number;
  images_removed: string[];
  image_bytes: number;
  networks_removed: number;
}

export async function collectGarbage(out: string, opts: { images: boolean; hostWide?: boolean }): Promise<GcReport> {
  // Containers first: a dead run's may still run, writing into the work disks below.
  const containers_removed = await removeOrphanContainers(opts.hostWide ? undefined : outIdentity(out));
  const work = outLayout.workRoot(out);
  const work_bytes = dirBytes(work);
  removeTree(work);
  const temps_removed = removeDeadTemps(out);
  const versions_removed = await pruneUnpublished(outLayout.dataset(out));
  const images_removed: string[] = [];
  let image_bytes = 0;
  if (opts.images) {
    // Lock images, then stacks, then bases: each stands on the next (the engine refuses an image with images on it).
    const bases = opts.hostWide ? (await Promise.all([LOCK_LABEL, STACK_LABEL, BASE_LABEL].map((label) => imagesLabelled(label)))).flat() : [];
    for (const image of [...new Ledger(out).all<BuildRecord>('build').flatMap((b) => (b.status === 'ok' && b.record ? [b.record.image] : [])), ...bases]) {
      const info = await inspectImage(image);
      // A base image that env images still stand on stays (the engine refuses): they go first, or not at all.
      if (
        !info ||
        !(await removeImage(image).then(
          () => true,
          () => false,
        ))
      )
        continue;
      images_removed.push(image);
      image_bytes += info.Size;
    }
  }
  const networks_removed = opts.hostWide ? await removeBuildNetworks() : 0;
  return { work_bytes, temps_removed, versions_removed, containers_removed, images_removed, image_bytes, networks_removed };
}
