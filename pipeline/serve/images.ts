/**
 * The tasks' env images on a rollout host: before `serve --registry` serves, each task's image (and
 * the base our Python runs on) that this engine lacks is pulled by the digests `worldline push`
 * recorded in the dataset's images.json, and refused if its id is not the task's
 * (sandbox/registry.ts `imageForTask`). An image already here is used as it is: nothing is rebuilt.
 */
import { inspectImage } from '../sandbox/engine.js';
import { imageForTask } from '../sandbox/registry.js';
import type { TaskCatalog } from './task_picker.js';

/** Pulls the task images this host lacks from `registry` through `dataset`'s images.json; returns how many came. */
export async function pullMissingImages(catalog: TaskCatalog, dataset: string, registry: string, log: (m: string) => void): Promise<number> {
  const seen = new Set<string>();
  let pulled = 0;
  for (const { task } of catalog.all()) {
    if (seen.has(task.image_id)) continue;
    seen.add(task.image_id);
    if (await inspectImage(task.image_id)) continue;
    await imageForTask(dataset, task, { registry });
    log(`pulled ${task.image_id.slice(7, 19)} (task ${task.instance_id}) from ${registry}`);
    pulled += 1;
  }
  return pulled;
}
