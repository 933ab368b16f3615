/**
 * The tasks' env images as they travel: `worldline push` sends each one to an OCI registry and
 * records its reference by digest in `OUT/images.json` (image id -> HOST[:PORT]/worldline/env@sha256:...),
 * beside the dataset; `worldline serve --registry` pulls, by those digests, the images this host
 * lacks before it serves, and refuses one whose id is not the task's. Nothing is ever rebuilt.
 */
import { existsSync, readFileSync } from 'node:fs';
import { writeFileAtomic } from '../../core/atomic.js';
import { outLayout } from '../runtime/layout.js';
import { hasImage, pullImage, pushImage } from '../sandbox/registry.js';
import type { TaskCatalog } from './task_picker.js';

type ImageRefs = Record<string, string>;

function readRefs(out: string): ImageRefs {
  const file = outLayout.images(out);
  return existsSync(file) ? (JSON.parse(readFileSync(file, 'utf8')) as ImageRefs) : {};
}

const imageIds = (catalog: TaskCatalog) => [...new Set(catalog.all().map((t) => t.task.image_id))];

/** Pushes every task image to `registry`; returns the references by digest, as written to OUT/images.json. */
export async function pushTaskImages(catalog: TaskCatalog, registry: string, log: (m: string) => void): Promise<ImageRefs> {
  const refs = readRefs(catalog.out);
  for (const id of imageIds(catalog)) {
    refs[id] = await pushImage(id, registry);
    log(`pushed ${id.slice(7, 19)} as ${refs[id]}`);
    writeFileAtomic(outLayout.images(catalog.out), `${JSON.stringify(refs, null, 1)}\n`);
  }
  return refs;
}

/** Pulls the task images this host lacks from `registry` (by OUT/images.json's digests); returns how many came. */
export async function pullMissingImages(catalog: TaskCatalog, registry: string, log: (m: string) => void): Promise<number> {
  const refs = readRefs(catalog.out);
  let pulled = 0;
  for (const id of imageIds(catalog)) {
    if (await hasImage(id)) continue;
    const ref = refs[id];
    if (!ref) throw new Error(`image ${id} is not here and ${outLayout.images(catalog.out)} has no reference for it: run worldline push first`);
    if (!ref.startsWith(`${registry}/`)) throw new Error(`image ${id} was pushed to ${ref.split('/')[0]}, not ${registry}`);
    const got = await pullImage(ref);
    if (got !== id) throw new Error(`${ref} gave image ${got}, not the task's ${id}`);
    log(`pulled ${ref}`);
    pulled += 1;
  }
  return pulled;
}
