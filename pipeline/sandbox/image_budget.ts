/**
 * `--image-budget GB`: env images of this process's finished units are removed, least recently
 * used first, while their total size is over the budget. Only images of units whose stages are
 * over are candidates (a unit in flight keeps its image), and only env images this process's
 * units used (another run's images on the same host are not ours to remove); base images are
 * never touched. A removed image is built again if a later stage needs it (build's `present`).
 * Sizes are Docker's (an env image with its base layers), so the budget is conservative. An env
 * image's lock image (lock_images.ts) goes with it once no other image stands on it (the engine
 * refuses while one does): it holds most of the bytes.
 */
import type { Ledger } from '../runtime/ledger.js';
import type { BuildRecord } from '../runtime/records.js';
import { docker, inspectImage, removeImage } from './engine.js';

export class ImageBudget {
  /** Image tag -> when its last unit finished. */
  private readonly lastUse = new Map<string, number>();
  /** Image tag -> the lock image it was built on. */
  private readonly lockOf = new Map<string, string>();
  /** Removals one at a time: two units finishing together must not both remove the same images. */
  private queue: Promise<void> = Promise.resolve();

  constructor(
    readonly bytes: number,
    private readonly log: (m: string) => void,
  ) {}

  /** A unit's stages are over: the image its build recorded may go from now on. */
  unitDone(ledger: Ledger, unitId: string): Promise<void> {
    const build = ledger.get<BuildRecord>('build', unitId);
    if (build?.status !== 'ok' || !build.record) return Promise.resolve();
    if (build.record.index?.lock_image) this.lockOf.set(build.record.image, build.record.index.lock_image);
    return this.release(build.record.image);
  }

  private release(tag: string): Promise<void> {
    this.lastUse.set(tag, Date.now());
    this.queue = this.queue.then(() => this.enforce());
    return this.queue;
  }

  /** Bytes of this process's released images still on disk. */
  async held(): Promise<number> {
    return (await this.mine()).reduce((s, i) => s + i.size, 0);
  }

  private async mine(): Promise<{ id: string; tag: string; size: number }[]> {
    const images = await docker().listImages({ filters: { label: ['worldline.unit'] } });
    return images.flatMap((img) => {
      const tag = (img.RepoTags ?? []).find((t) => this.lastUse.has(t));
      return tag ? [{ id: img.Id, tag, size: img.Size }] : [];
    });
  }

  private async enforce(): Promise<void> {
    const images = (await this.mine()).sort((a, b) => (this.lastUse.get(a.tag) ?? 0) - (this.lastUse.get(b.tag) ?? 0));
    let total = images.reduce((s, i) => s + i.size, 0);
    for (const img of images) {
      if (total <= this.bytes) break;
      await removeImage(img.id);
      const lock = this.lockOf.get(img.tag);
      const lockId = lock && (await inspectImage(lock))?.Id;
      // By id: the engine refuses it while another image stands on it, where a tag would only be untagged.
      if (lockId) await removeImage(lockId).catch(() => undefined);
      this.lastUse.delete(img.tag);
      this.lockOf.delete(img.tag);
      total -= img.size;
      this.log(
        `image budget: removed ${img.tag} (${(img.size / 1e9).toFixed(2)} GB); ${(total / 1e9).toFixed(2)} GB of ${(this.bytes / 1e9).toFixed(2)} GB held`,
      );
    }
  }
}
