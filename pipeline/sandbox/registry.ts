/**
 * Env images that travel: pushed by digest to an OCI registry (`HOST[:PORT]/worldline/env`) and
 * pulled back on a host that lacks them, so a rollout host needs the dataset and the registry, not
 * a build. An image's id is the digest of its config, which a schema-2 push and pull carry
 * unchanged: the id a task row names is the id the pulled image has, and a pull that gives another
 * is refused. `<dataset>/images.json` (written by `worldline push`, pipeline/push.ts) says where
 * each image is; `imageForTask` is how a task's image is found or fetched.
 *
 * The engine reaches a registry over plain HTTP only on 127.0.0.0/8 (and what its
 * `insecure-registries` lists); any other needs TLS the engine trusts (docs/tasks.md).
 */
import { readFileSync } from 'node:fs';
import type { IncomingMessage } from 'node:http';
import { join } from 'node:path';
import { writeFileAtomic } from '../../core/atomic.js';
import { docker, inspectImage, removeImage } from './engine.js';

/** The repository every env image goes to in a registry; the tag names one image. */
export const ENV_REPOSITORY = 'worldline/env';

/** The file beside a dataset's manifest.json that says where its images are. */
export const IMAGES_FILE = 'images.json';

/**
 * What went wrong, for a caller to act on: the registry could not be reached (or spoke no TLS the
 * engine accepts), it refused the request (auth, a bad name, no such manifest), the image is too
 * large for it (or its disk), it gave no answer in time, the image it gave is not the one asked
 * for, the image is nowhere, or anything else the engine said.
 */
export type RegistryErrorKind = 'unreachable' | 'refused' | 'size' | 'timeout' | 'mismatch' | 'missing' | 'failed';

export class RegistryError extends Error {
  constructor(
    readonly kind: RegistryErrorKind,
    message: string,
  ) {
    super(message);
    this.name = 'RegistryError';
  }
}

/** The engine's words for each kind, first match wins: its messages are Go errors passed through. */
const KINDS: [RegistryErrorKind, RegExp][] = [
  ['missing', /manifest unknown|not found: manifest|no such image|repository does not exist|blob unknown/i],
  // Not a bare "exceeded": Go's "context deadline exceeded" is the network's, not the image's size.
  ['size', /\b413\b|too large|no space left|quota exceeded|exceeds? the (maximum|limit)/i],
  ['refused', /denied|unauthori[sz]ed|forbidden|\b40[135]\b|invalid reference|manifest invalid|name invalid/i],
  [
    'unreachable',
    /connection refused|no such host|i\/o timeout|deadline exceeded|Client\.Timeout|network is unreachable|no route to host|dial tcp|EOF|HTTP response to HTTPS client|x509|certificate|tls:/i,
  ],
];

/** Where the engine's words call for TLS or the insecure-registries list, a user needs to know which. */
const TLS_HINT = /HTTP response to HTTPS client|x509|certificate|tls:/i;

function registryError(registry: string, what: string, message: string): RegistryError {
  const kind = KINDS.find(([, p]) => p.test(message))?.[0] ?? 'failed';
  const hint = TLS_HINT.test(message)
    ? " (the engine reaches a registry off 127.0.0.0/8 over TLS it trusts only: give the registry a certificate, or list it in the engine's insecure-registries)"
    : '';
  const says = { unreachable: 'unreachable', refused: 'refused', size: 'refused for size', missing: 'has no such image' }[kind as string] ?? 'failed';
  return new RegistryError(kind, `registry ${registry} ${says}: ${what}: ${message}${hint}`);
}

/**
 * A registry as `HOST[:PORT]`: the host must read as one (a dot, a port, or `localhost`), else the
 * engine would take `name/worldline/env` for a Docker Hub repository of user `name`.
 */
export function registryHost(value: string): string {
  const v = value.trim().replace(/\/+$/, '');
  const m = /^(\[[0-9a-f:]+\]|[a-z0-9]([a-z0-9.-]*[a-z0-9])?)(:(\d{1,5}))?$/i.exec(v);
  if (!m || (m[4] !== undefined && Number(m[4]) > 65535)) throw new RegistryError('failed', `registry ${value}: not HOST[:PORT]`);
  if (!m[3] && !m[1].includes('.') && !m[1].startsWith('[') && m[1] !== 'localhost')
    throw new RegistryError('failed', `registry ${value}: name it with a dot or a port (HOST.DOMAIN, HOST:PORT): a bare name is a Docker Hub user`);
  return v;
}

/** How long an engine stream may run in all, and without a word from it (a registry that accepts and never answers). */
export interface Bounds {
  timeoutMs?: number;
  idleMs?: number;
}

const DEFAULT_TIMEOUT_MS = 30 * 60_000;
const DEFAULT_IDLE_MS = 120_000;

interface ProgressEvent {
  status?: string;
  error?: string;
  errorDetail?: { message?: string };
  aux?: { Digest?: string; Tag?: string; Size?: number };
}

/**
 * Runs a push or pull request on the engine and follows its progress stream to the end, bounded in
 * all and between events; the request is aborted at either bound (the engine then stops the
 * transfer). Returns the events; an error event or the bound is thrown as a RegistryError.
 */
async function followBounded(registry: string, what: string, request: (signal: AbortSignal) => Promise<unknown>, bounds: Bounds): Promise<ProgressEvent[]> {
  const timeoutMs = bounds.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const idleMs = bounds.idleMs ?? DEFAULT_IDLE_MS;
  const controller = new AbortController();
  let late: string | null = null;
  const stop = (why: string) => {
    late ??= why;
    controller.abort();
  };
  const total = setTimeout(() => stop(`not done in ${Math.round(timeoutMs / 1000)} s`), timeoutMs);
  let idle = setTimeout(() => stop(`no answer in ${Math.round(idleMs / 1000)} s`), idleMs);
  const heard = () => {
    clearTimeout(idle);
    idle = setTimeout(() => stop(`no progress in ${Math.round(idleMs / 1000)} s`), idleMs);
  };
  const timedOut = () => new RegistryError('timeout', `registry ${registry}: ${what} stopped, ${late} (unreachable or too slow)`);
  const events: ProgressEvent[] = [];
  try {
    const stream = (await request(controller.signal)) as IncomingMessage;
    await new Promise<void>((resolve, reject) => {
      // An abort destroys the stream, which may end without an error: the bound says why.
      controller.signal.addEventListener('abort', () => reject(new Error('aborted')), { once: true });
      docker().modem.followProgress(
        stream,
        (err) => (err ? reject(err) : resolve()),
        (event: ProgressEvent) => {
          heard();
          events.push(event);
        },
      );
    });
  } catch (e) {
    if (late) throw timedOut();
    // The client's wrapping of an engine error ("(HTTP code 500) server error - ") says nothing the engine's words do not.
    throw registryError(registry, what, (e as Error).message.replace(/^\(HTTP code \d+\)[^-]*- /, '').trim());
  } finally {
    clearTimeout(total);
    clearTimeout(idle);
  }
  if (late) throw timedOut();
  const failed = events.find((e) => e.error);
  if (failed) throw registryError(registry, what, failed.errorDetail?.message ?? failed.error ?? '');
  return events;
}

/** Where one image is in a registry: the name it was pushed as, its manifest's digest, its size on an engine. */
export interface PushedImage {
  /** `HOST[:PORT]/worldline/env:<tag>` */
  reference: string;
  /** The manifest's digest (`sha256:...`): what a pull names, so it gets exactly this image. */
  digest: string;
  /** The image's size on the engine, unpacked: what a pull needs on disk. */
  bytes: number;
}

/** A reference's repository and tag (`HOST:PORT/worldline/env` and `<tag>`): a port's colon is before the last slash. */
function splitReference(reference: string): { repo: string; tag: string } {
  const colon = reference.lastIndexOf(':');
  return colon > reference.lastIndexOf('/') ? { repo: reference.slice(0, colon), tag: reference.slice(colon + 1) } : { repo: reference, tag: 'latest' };
}

/** The reference that pulls exactly this image: `HOST[:PORT]/worldline/env@sha256:...`. */
export const pinnedReference = (image: PushedImage): string => `${splitReference(image.reference).repo}@${image.digest}`;

/** The registry (`HOST[:PORT]`) of a reference: everything before the first slash. */
const registryOf = (reference: string) => reference.split('/')[0];

/**
 * Pushes an image (a local tag or id) to `registry` as `HOST[:PORT]/worldline/env:<tag>` and returns
 * its id and where it now is. The tag is the image's own `worldline/env:` tag's (a build's
 * `<slug>-<hash>`) when it has one, else its id's hex: either names one image.
 */
export async function pushImage(image: string, registry: string, bounds: Bounds = {}): Promise<PushedImage & { imageId: string }> {
  const host = registryHost(registry);
  const info = await inspectImage(image);
  if (!info) throw new RegistryError('missing', `image ${image} is not on this engine: nothing to push`);
  const own = info.RepoTags?.find((t) => t.startsWith(`${ENV_REPOSITORY}:`));
  const tag = own ? own.slice(ENV_REPOSITORY.length + 1) : info.Id.replace(/^sha256:/, '');
  const repository = `${host}/${ENV_REPOSITORY}`;
  const reference = `${repository}:${tag}`;
  await docker().getImage(info.Id).tag({ repo: repository, tag });
  let digest: string | undefined;
  try {
    // The engine wants an auth header on a push even for a registry that asks none: an empty one.
    const events = await followBounded(
      host,
      `the push of ${image}`,
      (signal) =>
        docker()
          .getImage(repository)
          .push({ tag, abortSignal: signal, authconfig: {} } as object),
      bounds,
    );
    digest =
      events.find((e) => e.aux?.Digest)?.aux?.Digest ?? (await inspectImage(info.Id))?.RepoDigests?.find((d) => d.startsWith(`${repository}@`))?.split('@')[1];
  } finally {
    // The registry's name was for the push: it goes again, pushed or not (a shared base would
    // gather one per registry), unless it was there before or is the image's only name (removing
    // that would remove the image).
    if (!info.RepoTags?.includes(reference) && info.RepoTags?.length) await removeImage(reference).catch(() => undefined);
  }
  if (!digest?.startsWith('sha256:')) throw new RegistryError('failed', `registry ${host}: the push of ${image} ended without a manifest digest`);
  return { imageId: info.Id, reference, digest, bytes: info.Size };
}

/**
 * Makes the image `imageId` (`sha256:...`, its config digest) present on this engine: nothing when
 * it is, else pulled by `registryRef` (`HOST[:PORT]/worldline/env@sha256:<manifest digest>`) and
 * checked to be that id (a different image is refused, naming both). Returns the
 * id, a local reference a container can be made from.
 */
export async function ensureImage(imageId: string, registryRef?: string, bounds: Bounds = {}): Promise<string> {
  if (await inspectImage(imageId)) return imageId;
  if (!registryRef) throw new RegistryError('missing', `image ${imageId} is not on this engine and no registry was named to pull it from`);
  if (!/@sha256:[0-9a-f]{64}$/.test(registryRef))
    throw new RegistryError(
      'failed',
      `${registryRef}: pull by manifest digest (HOST[:PORT]/${ENV_REPOSITORY}@sha256:...), so the registry cannot give another image`,
    );
  const registry = registryOf(registryRef);
  await followBounded(
    registry,
    `the pull of ${registryRef}`,
    (signal) => docker().createImage({ fromImage: registryRef, abortSignal: signal, authconfig: {} }),
    bounds,
  );
  const pulled = await inspectImage(registryRef);
  if (pulled?.Id === imageId) return imageId;
  // What came instead stays: it may be an image this host holds for something else.
  throw new RegistryError(
    'mismatch',
    `registry ${registry} gave ${pulled?.Id ?? 'no image'} for ${registryRef}, not the expected ${imageId}: refused (the registry's copy is not the image the dataset names)`,
  );
}

/** `<dataset>/images.json`: where each image the dataset's tasks name is, by image id. */
export interface ImagesFile {
  format: 'worldline-images';
  format_version: 1;
  images: Record<string, PushedImage>;
}

export function readImagesFile(datasetDir: string): ImagesFile | null {
  let text: string;
  try {
    text = readFileSync(join(datasetDir, IMAGES_FILE), 'utf8');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw e;
  }
  const file = JSON.parse(text) as ImagesFile;
  if (file.format !== 'worldline-images' || file.format_version !== 1)
    throw new Error(`${join(datasetDir, IMAGES_FILE)}: not a worldline images file of format version 1`);
  return file;
}

/** Writes `<dataset>/images.json` in one rename: a reader sees the old file or the new. */
export function writeImagesFile(datasetDir: string, images: Record<string, PushedImage>): void {
  const file: ImagesFile = { format: 'worldline-images', format_version: 1, images };
  writeFileAtomic(join(datasetDir, IMAGES_FILE), `${JSON.stringify(file, null, 2)}\n`);
}

/**
 * The base image an env image names in its `worldline.base` label (pipeline/stages/build.ts), or
 * null (none, or the image is its own base): our processes in its containers run on the base's
 * Python (our_python.ts), so a host that runs the image needs the base too.
 */
export async function baseImageOf(imageId: string): Promise<string | null> {
  const base = (await inspectImage(imageId))?.Config?.Labels?.['worldline.base'];
  return base && base !== imageId ? base : null;
}

/**
 * The local image a task runs in (`task.image_id`), pulled through `<dataset>/images.json` when
 * this engine lacks it, with the base image it names (whose Python our processes in its containers
 * run on: pipeline/sandbox/our_python.ts), tagged again as pushed so no prune takes it for a
 * leftover. `registry` (`serve --registry`) pulls from that `HOST[:PORT]` instead of the one
 * images.json names (the same registry by the name this host knows it by, or a mirror of it): a
 * digest names the same image in any registry. For `worldline serve`: what it makes a task's
 * containers from.
 */
export async function imageForTask(
  datasetDir: string,
  task: { instance_id: string; image_id: string },
  opts: Bounds & { registry?: string } = {},
): Promise<string> {
  const registry = opts.registry === undefined ? undefined : registryHost(opts.registry);
  let images: ImagesFile | null | undefined;
  const present = async (imageId: string, why: string) => {
    if (await inspectImage(imageId)) return;
    images ??= readImagesFile(datasetDir);
    const pushed = images?.images[imageId];
    if (!pushed)
      throw new RegistryError(
        'missing',
        `${why} ${imageId} is not on this engine and ${join(datasetDir, IMAGES_FILE)} ${images ? 'does not list it' : 'does not exist'}: run worldline push --dataset on the host that built it`,
      );
    const where = registry ? { ...pushed, reference: `${registry}/${pushed.reference.slice(pushed.reference.indexOf('/') + 1)}` } : pushed;
    await ensureImage(imageId, pinnedReference(where), opts);
    await docker().getImage(imageId).tag(splitReference(where.reference));
  };
  await present(task.image_id, `the image of task ${task.instance_id}`);
  const base = await baseImageOf(task.image_id);
  if (base) await present(base, `the base image of task ${task.instance_id}`);
  return task.image_id;
}
