/**
 * A small file system of its own, for the full-disk schedule of the fault harness: a sparse file
 * formatted ext4 (no reserved blocks) and loop-mounted; `fill` leaves only so many bytes free.
 * Needs root and a loop device. `destroy` unmounts it and removes the file.
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, rmSync, statfsSync } from 'node:fs';
import { join } from 'node:path';

export class LoopDisk {
  private constructor(
    readonly image: string,
    readonly mountpoint: string,
  ) {}

  static create(image: string, mountpoint: string, sizeBytes: number): LoopDisk {
    mkdirSync(mountpoint, { recursive: true });
    execFileSync('truncate', ['-s', String(sizeBytes), image]);
    execFileSync('mkfs.ext4', ['-q', '-F', '-m', '0', image]);
    execFileSync('mount', ['-o', 'loop', image, mountpoint]);
    rmSync(join(mountpoint, 'lost+found'), { recursive: true, force: true });
    return new LoopDisk(image, mountpoint);
  }

  /** Bytes free for an unprivileged writer. */
  free(): number {
    const s = statfsSync(this.mountpoint);
    return s.bavail * s.bsize;
  }

  private get filler(): string {
    return join(this.mountpoint, 'filler');
  }

  /** Fills the disk until `leave` bytes are free (the filler file grows or shrinks). */
  fill(leave: number): void {
    this.unfill();
    const take = this.free() - leave;
    if (take > 0) execFileSync('fallocate', ['-l', String(take), this.filler]);
  }

  unfill(): void {
    rmSync(this.filler, { force: true });
  }

  destroy(): void {
    try {
      execFileSync('umount', [this.mountpoint], { stdio: 'ignore' });
    } catch {
      execFileSync('umount', ['-l', this.mountpoint], { stdio: 'ignore' });
    }
    rmSync(this.image, { force: true });
    rmSync(this.mountpoint, { recursive: true, force: true });
  }
}
