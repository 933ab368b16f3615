/**
 * `worldline push --dataset DIR --registry HOST[:PORT]`: pushes every distinct env image the
 * dataset's tasks name (and the base image each names: our processes run on its Python) that this
 * engine holds, by digest, and records where each went in `DIR/images.json` (sandbox/registry.ts),
 * so a rollout host pulls them instead of building. An image this host lacks, or one the registry
 * refuses, is an error of its own; the others are still pushed and recorded.
 */
import { join } from 'node:path';
import { readRows } from '../datasets/reader.js';
import { type Bounds, baseImageOf, IMAGES_FILE, type PushedImage, pushImage, readImagesFile, registryHost, writeImagesFile } from './sandbox/registry.js';

export interface PushReport {
  registry: string;
  images_file: string;
  pushed: ({ image_id: string } & PushedImage)[];
  failed: { image_id: string; error: string }[];
}

/** The distinct image ids of the dataset's tasks, each with how many tasks name it. */
async function taskImages(datasetDir: string): Promise<Map<string, number>> {
  const counts = new Map<string, number>();
  for await (const row of readRows(datasetDir, { config: 'tasks', columns: ['image_id'] })) {
    const id = row.image_id as string;
    counts.set(id, (counts.get(id) ?? 0) + 1);
  }
  return counts;
}

export async function pushDataset(datasetDir: string, registry: string, log: (m: string) => void, bounds: Bounds = {}): Promise<PushReport> {
  const host = registryHost(registry);
  const report: PushReport = { registry: host, images_file: join(datasetDir, IMAGES_FILE), pushed: [], failed: [] };
  const images = await taskImages(datasetDir);
  // One at a time: the engine pushes an image's layers in parallel already, and skips those the
  // registry holds (a base's layers, after the first image on it).
  const queue = [...images.keys()];
  const seen = new Set(queue);
  for (let i = 0; i < queue.length; i++) {
    const id = queue[i];
    const what = images.has(id) ? `image ${id} (${images.get(id)} task(s))` : `base image ${id}`;
    try {
      const pushed = await pushImage(id, host, bounds);
      report.pushed.push({ image_id: id, reference: pushed.reference, digest: pushed.digest, bytes: pushed.bytes });
      log(`pushed ${what} as ${pushed.reference}@${pushed.digest}`);
      const base = await baseImageOf(id);
      if (base && !seen.has(base)) {
        seen.add(base);
        queue.push(base);
      }
    } catch (e) {
      report.failed.push({ image_id: id, error: `${what}: ${(e as Error).message}` });
      log(`not pushed: ${what}: ${(e as Error).message}`);
    }
  }
  // Images pushed before and not again this time keep their entries: they are still where they went.
  const previous = readImagesFile(datasetDir)?.images ?? {};
  const now = Object.fromEntries(report.pushed.map(({ image_id, ...where }) => [image_id, where]));
  writeImagesFile(datasetDir, { ...previous, ...now });
  return report;
}
