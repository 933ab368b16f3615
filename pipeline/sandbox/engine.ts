/**
 * The Docker Engine itself, on dockerode: the client, and images (build, import, inspect, remove).
 * Containers are sandbox.ts's. Nothing outside pipeline/sandbox/ talks to the engine.
 */

import { spawn } from 'node:child_process';
import { createWriteStream } from 'node:fs';
import type { IncomingMessage } from 'node:http';
import { hostname } from 'node:os';
import type { Readable } from 'node:stream';
import Docker from 'dockerode';
import { hashOf } from '../../core/hashing.js';
import { alive, withLock } from '../../core/lock.js';
import { abortOnCancel, engineWentAway, JOB_LABEL, JobCancelled, jobCancelled, jobLabel, OUT_LABEL, outLabel } from '../runtime/job_scope.js';
import { machineLock } from '../runtime/layout.js';

let client: Docker | undefined;

/** Errors that mean the engine itself is gone (stopped, restarting), not that a request was refused. */
const ENGINE_GONE = new Set(['ECONNREFUSED', 'ECONNRESET', 'ENOENT', 'EPIPE']);

/**
 * The engine's client, for the other files of pipeline/sandbox/ only. Every request that finds the
 * engine gone says so (job_scope.ts `engineWentAway`): what was in flight then is not recorded.
 */
export function docker(): Docker {
  if (client) return client;
  client = new Docker({ socketPath: process.env.DOCKER_SOCKET ?? '/var/run/docker.sock' });
  const modem = client.modem as { dial(options: { path?: string }, callback: (err: NodeJS.ErrnoException | null, data: unknown) => void): void };
  const dial = modem.dial.bind(modem);
  modem.dial = (options, callback) =>
    dial(options, (err, data) => {
      if (err?.code && ENGINE_GONE.has(err.code)) engineWentAway(`${err.code} from the engine on ${options.path?.split('?')[0]}`);
      callback(err, data);
    });
  return client;
}

let watching = false;

/**
 * Watches the engine while containers of ours may run: one idle event stream, which an engine
 * restart closes whatever it was doing then. Started before a container is made; after a loss the
 * next container starts it again.
 */
export function watchEngine(): void {
  if (watching) return;
  watching = true;
  docker()
    .getEvents({ filters: { type: ['daemon'] } })
    .then((stream) => {
      const events = stream as IncomingMessage;
      // It must not keep a finished process alive.
      events.socket?.unref();
      events.on('error', () => undefined);
      events.once('close', () => {
        watching = false;
        engineWentAway('its event stream closed');
      });
      events.resume();
    })
    .catch(() => {
      watching = false;
    });
}

/**
 * Whether a container that died of a signal we did not send was killed from outside: an engine
 * stopping (it answers until its containers are down, so their runs end with an exit code that
 * looks like any other), or a person. The engine's own event log says; a test inside cannot
 * signal the container's init.
 */
async function killedFromOutside(id: string, sinceS: number): Promise<string | null> {
  try {
    const stream = (await docker().getEvents({
      since: sinceS - 1,
      until: Math.ceil(Date.now() / 1000) + 1,
      filters: { container: [id], event: ['kill'] },
    })) as IncomingMessage;
    let text = '';
    for await (const chunk of stream) text += String(chunk);
    const kill = text
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as { Actor?: { Attributes?: { signal?: string } } })[0];
    return kill ? `container ${id.slice(0, 12)} was killed from outside (signal ${kill.Actor?.Attributes?.signal ?? '?'})` : null;
  } catch (e) {
    return `cannot read the engine's events for container ${id.slice(0, 12)}: ${(e as Error).message}`;
  }
}

export async function assertDockerUp(): Promise<void> {
  try {
    await docker().ping();
  } catch (e) {
    throw new Error(
      `Docker Engine does not answer on ${process.env.DOCKER_SOCKET ?? '/var/run/docker.sock'} (${(e as Error).message}); start it with scripts/setup-docker.sh`,
    );
  }
}

export async function inspectImage(ref: string): Promise<Docker.ImageInspectInfo | null> {
  try {
    return await docker().getImage(ref).inspect();
  } catch (e) {
    if ((e as { statusCode?: number }).statusCode === 404) return null;
    throw e;
  }
}

/** A tar stream made by the system tar (handles links and modes as Docker expects). */
export function tarStream(args: string[]): Readable {
  const child = spawn('tar', ['--numeric-owner', '-c', ...args], { stdio: ['ignore', 'pipe', 'inherit'] });
  return child.stdout;
}

export interface BuildResult {
  ok: boolean;
  error: string | null;
  imageId: string | null;
  timedOut: boolean;
}

/**
 * The network package installs run on: a bridge of its own, so a build reaches the package
 * mirrors through the host's routing but not services on the host's loopback (127.0.0.1 in a
 * container is the container's own), nor other containers (no inter-container traffic).
 */
export const BUILD_NETWORK = 'worldline-build';

/** The build network's id, once this process has it: builds name it by id, which no duplicate can make ambiguous. */
let buildNetworkId: Promise<string> | null = null;

/**
 * The build network's id, made once per engine however many runs and workers start together on
 * it. The engine does not make create-if-absent atomic (CheckDuplicate is a list and then a
 * create), so the look-and-make runs under a host-wide lock per engine; copies made anyway (by an
 * older Worldline, or by a process on another host sharing the engine) are repaired: the one in
 * use (else the oldest) is kept, the empty others removed, with a log line.
 */
export function buildNetwork(): Promise<string> {
  buildNetworkId ??= findOrMakeBuildNetwork().catch((e) => {
    buildNetworkId = null;
    throw e;
  });
  return buildNetworkId;
}

/** Forgets the build network's id: the next build looks again (it was removed, or the engine restarted). */
function forgetBuildNetwork(): void {
  buildNetworkId = null;
}

async function findOrMakeBuildNetwork(): Promise<string> {
  const { ID } = (await docker().info()) as { ID: string };
  return withLock(machineLock(`build-network-${hashOf(ID)}`), async () => {
    const found = await buildNetworks();
    if (found.length === 1) return found[0].Id;
    if (found.length > 1) return keepOneBuildNetwork(found);
    const made = await docker().createNetwork({
      Name: BUILD_NETWORK,
      Driver: 'bridge',
      CheckDuplicate: true,
      Labels: { 'worldline.role': 'build-network' },
      Options: { 'com.docker.network.bridge.enable_icc': 'false' },
    });
    return made.id as string;
  });
}

/** Every network of the build network's name (the engine's name filter matches substrings too). */
async function buildNetworks(): Promise<Docker.NetworkInspectInfo[]> {
  const listed = await docker().listNetworks({ filters: { name: [BUILD_NETWORK] } });
  return Promise.all(listed.filter((n) => n.Name === BUILD_NETWORK).map((n) => docker().getNetwork(n.Id).inspect() as Promise<Docker.NetworkInspectInfo>));
}

/** Keeps the copy a build is using (else the oldest; ties by id) and removes the empty others; returns the kept one's id. */
async function keepOneBuildNetwork(found: Docker.NetworkInspectInfo[]): Promise<string> {
  const used = (n: Docker.NetworkInspectInfo) => Object.keys(n.Containers ?? {}).length;
  const [keep, ...others] = [...found].sort((a, b) => used(b) - used(a) || a.Created.localeCompare(b.Created) || a.Id.localeCompare(b.Id));
  const removed: string[] = [];
  for (const n of others) {
    if (used(n)) continue;
    await docker()
      .getNetwork(n.Id)
      .remove()
      .then(() => removed.push(n.Id.slice(0, 12)))
      .catch(() => undefined);
  }
  console.error(
    `worldline: found ${found.length} networks named ${BUILD_NETWORK}; kept ${keep.Id.slice(0, 12)}, removed ${removed.length ? removed.join(', ') : 'none'}` +
      (removed.length < others.length ? ` (${others.length - removed.length} in use by a build stay until it ends)` : ''),
  );
  return keep.Id;
}

/** Removes the build network (every copy) when no build uses it: the next build makes it again. Returns how many went. */
export async function removeBuildNetworks(): Promise<number> {
  let removed = 0;
  for (const n of await buildNetworks()) {
    if (Object.keys(n.Containers ?? {}).length) continue;
    await docker()
      .getNetwork(n.Id)
      .remove()
      .then(() => removed++)
      .catch(() => undefined);
  }
  forgetBuildNetwork();
  return removed;
}

/**
 * What a failed build said that is the engine's fault, not the build's: a layer the build cache
 * named is gone (an image removed under it, a build stopped half-way), the build network missing
 * or made twice, the daemon gone. Such a build is tried once more without the cache.
 */
const ENGINE_FAULTS = [
  /unable to find image/i,
  /no such image/i,
  /network [^ ]+ not found/i,
  /network [^ ]+ is ambiguous/i,
  /layer does not exist/i,
  /failed to register layer/i,
  /socket hang up|ECONNRESET|ECONNREFUSED|EPIPE/,
];

export function engineFault(message: string | null | undefined): boolean {
  return !!message && ENGINE_FAULTS.some((p) => p.test(message));
}

/**
 * Builds from a context folder on the build network (package installs only: see
 * pipeline/stages/build.ts), under the memory and CPU limits, streaming the build output to
 * `logFile`. The build is cancelled at `timeoutMs`.
 */
export async function buildImage(opts: {
  /** Made only when the engine is ready to read it: a tar that exits before it is read loses its data. */
  context: () => Readable;
  tag: string;
  logFile: string;
  timeoutMs: number;
  memoryBytes: number;
  cpus: number;
  labels?: Record<string, string>;
  /** Build every step afresh: the retry after an engine fault (`engineFault`). */
  noCache?: boolean;
}): Promise<BuildResult> {
  watchEngine();
  const network = await buildNetwork();
  const log = createWriteStream(opts.logFile);
  const controller = new AbortController();
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    controller.abort();
  }, opts.timeoutMs);
  let lastError: string | null = null;
  const unlisten = abortOnCancel(controller);
  try {
    const stream = await docker().buildImage(opts.context(), {
      t: opts.tag,
      networkmode: network,
      nocache: opts.noCache ?? false,
      memory: opts.memoryBytes,
      memswap: opts.memoryBytes,
      cpuperiod: 100_000,
      cpuquota: Math.round(opts.cpus * 100_000),
      rm: true,
      forcerm: true,
      labels: opts.labels,
      abortSignal: controller.signal,
    } as Docker.ImageBuildOptions);
    await new Promise<void>((resolve, reject) => {
      docker().modem.followProgress(
        stream,
        (err) => (err ? reject(err) : resolve()),
        (event: { stream?: string; error?: string; errorDetail?: { message?: string } }) => {
          if (event.stream) log.write(event.stream);
          if (event.error) {
            lastError = event.errorDetail?.message ?? event.error;
            log.write(`ERROR: ${lastError}\n`);
          }
        },
      );
    });
  } catch (e) {
    lastError ??= (e as Error).message;
  } finally {
    clearTimeout(timer);
    unlisten();
    await new Promise((r) => log.end(r));
  }
  if (jobCancelled()) return { ok: false, error: 'job cancelled: the build was stopped', imageId: null, timedOut };
  if (timedOut) return { ok: false, error: `build exceeded its timeout of ${Math.round(opts.timeoutMs / 1000)} s`, imageId: null, timedOut };
  if (lastError) {
    // The network may be gone or doubled since this process looked: the retry looks again.
    if (engineFault(lastError)) forgetBuildNetwork();
    return { ok: false, error: lastError, imageId: null, timedOut };
  }
  const info = await inspectImage(opts.tag);
  if (!info) return { ok: false, error: 'the build reported success but no image was tagged', imageId: null, timedOut };
  return { ok: true, error: null, imageId: info.Id, timedOut };
}

/**
 * Imports a root filesystem (a tar stream) as an image with Dockerfile `changes` (ENV, LABEL,
 * CMD): how the offline base images are made from debootstrap trees.
 */
export async function importImage(rootfs: Readable, tag: string, changes: string[]): Promise<void> {
  const [repo, version] = tag.split(':');
  const stream = await docker().importImage(rootfs, { repo, tag: version, changes } as object);
  await new Promise<void>((resolve, reject) => {
    docker().modem.followProgress(stream, (err: Error | null, events: { error?: string }[]) => {
      const failed = events?.find((e) => e.error);
      if (err || failed) reject(new Error(`docker import of ${tag} failed: ${err?.message ?? failed?.error}`));
      else resolve();
    });
  });
}

/** Removes an image by tag or id; an image already gone is no error. */
export async function removeImage(ref: string): Promise<void> {
  await docker()
    .getImage(ref)
    .remove({ force: true })
    .catch((e: { statusCode?: number }) => {
      if (e.statusCode !== 404) throw e;
    });
}

/** Ids of the images carrying `label` created at or after `since` (seconds since the epoch). */
export async function imagesLabelled(label: string, since = 0): Promise<string[]> {
  const images = await docker().listImages({ filters: { label: [label] } });
  return images.filter((img) => img.Created >= since).map((img) => img.Id);
}

/**
 * Every container names the process that made it, so a run killed with SIGKILL (which cannot
 * clean up) leaves containers the next run on this host can recognise as orphans.
 */
export const OWNER_LABEL = { 'worldline.owner': `${hostname()}:${process.pid}` };

/**
 * A new container: its labels are the caller's, the queue job it runs for (if any), the output
 * folder it works for (if any) and its owner. None is made for a cancelled job or a stopping
 * process; one made while that happened (its removal swept past it) goes at once.
 */
export async function newContainer(opts: Docker.ContainerCreateOptions): Promise<Docker.Container> {
  const labels = { ...opts.Labels, ...jobLabel(), ...outLabel(), ...OWNER_LABEL };
  watchEngine();
  const container = await docker().createContainer({ ...opts, Labels: labels });
  if (jobCancelled()) {
    await container.remove({ force: true, v: true }).catch(() => undefined);
    throw new JobCancelled('cancelled while its container was made');
  }
  return container;
}

/** Containers this process removed (a timed-out job's, a stop's): their deaths are ours, not the engine's. */
const removedByUs = new Set<string>();

/** Removes the containers, running or not, with `label` (a label filter) whose labels `pick` accepts; returns how many went. */
async function removeContainers(label: string, pick: (labels: Record<string, string>) => boolean): Promise<number> {
  let removed = 0;
  for (const c of await docker().listContainers({ all: true, filters: { label: [label] } })) {
    if (!pick(c.Labels)) continue;
    removedByUs.add(c.Id);
    await docker()
      .getContainer(c.Id)
      .remove({ force: true })
      .then(() => removed++)
      .catch(() => undefined);
  }
  return removed;
}

/** Removes the containers of one queue job (`runtime/job_scope.ts`); returns how many went. */
export const removeJobContainers = (jobId: string): Promise<number> => removeContainers(`${JOB_LABEL}=${jobId}`, () => true);

/** Removes every container this process made (a stop: running or not); returns how many went. */
export const removeOwnContainers = (): Promise<number> => removeContainers(`worldline.owner=${OWNER_LABEL['worldline.owner']}`, () => true);

/**
 * Removes the containers of dead Worldline processes on this host (a killed run's orphans, which
 * may still be running and writing into a work folder a rerun reuses); a live run's stay. With
 * `outId` (job_scope.ts `outIdentity`) only those of that output folder's runs, else of every
 * folder's. Returns how many went.
 */
export async function removeOrphanContainers(outId?: string): Promise<number> {
  const host = hostname();
  return removeContainers(outId ? `${OUT_LABEL}=${outId}` : 'worldline.owner', (labels) => {
    const [owner, pid] = (labels['worldline.owner'] ?? '').split(':');
    return owner === host && !alive(Number(pid));
  });
}

/** Says so (job_scope.ts `engineWentAway`) when the container `id`, started at `sinceS`, was killed from outside. */
export async function engineDisturbedBy(id: string, sinceS: number): Promise<void> {
  if (removedByUs.delete(id)) return;
  const why = await killedFromOutside(id, sinceS);
  if (why) engineWentAway(why);
}
