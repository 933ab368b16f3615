/**
 * Env images through an OCI registry, by digest: a rollout host needs the dataset and the
 * registry, not a build. An image is pushed under `<registry>/worldline/env`, tagged by its id,
 * and pulled back by the manifest digest the push reported; the pulled image's id (its config's
 * digest) is the task's `image_id` again, which the caller checks.
 */
import type { Readable } from 'node:stream';
import { docker, inspectImage } from './engine.js';

const REPOSITORY = 'worldline/env';

function follow(stream: Readable, what: string): Promise<{ aux?: { Digest?: string }; error?: string }[]> {
  return new Promise((resolve, reject) => {
    docker().modem.followProgress(stream, (err: Error | null, events: { aux?: { Digest?: string }; error?: string }[]) => {
      const failed = events?.find((e) => e.error);
      if (err || failed) reject(new Error(`${what} failed: ${err?.message ?? failed?.error}`));
      else resolve(events);
    });
  });
}

/** Pushes the local image `imageId` to `registry` (HOST[:PORT]); returns the reference by digest it can be pulled by. */
export async function pushImage(imageId: string, registry: string): Promise<string> {
  const repo = `${registry}/${REPOSITORY}`;
  const tag = imageId.replace(/^sha256:/, '').slice(0, 32);
  await docker().getImage(imageId).tag({ repo, tag });
  try {
    const stream = (await docker().getImage(`${repo}:${tag}`).push({ tag })) as unknown as Readable;
    const digest = (await follow(stream, `docker push of ${imageId} to ${registry}`)).find((e) => e.aux?.Digest)?.aux?.Digest;
    if (!digest) throw new Error(`docker push of ${imageId} to ${registry} reported no digest`);
    return `${repo}@${digest}`;
  } finally {
    // The registry's tag was only the push's handle: the image keeps its own.
    await docker()
      .getImage(`${repo}:${tag}`)
      .remove({ noprune: true })
      .catch(() => undefined);
  }
}

/** Pulls `ref` (a reference by digest); returns the id of the image it gave. */
export async function pullImage(ref: string): Promise<string> {
  const stream = (await docker().pull(ref)) as Readable;
  await follow(stream, `docker pull of ${ref}`);
  const info = await inspectImage(ref);
  if (!info) throw new Error(`docker pull of ${ref} left no image`);
  return info.Id;
}

/** Whether the engine has the image `imageId`. */
export async function hasImage(imageId: string): Promise<boolean> {
  return (await inspectImage(imageId)) !== null;
}
