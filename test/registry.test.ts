/**
 * Images that travel (pipeline/sandbox/registry.ts, pipeline/push.ts) on a real registry: Debian's
 * docker-registry on loopback. A push and a pull give the same image id and manifest digest; a pull
 * that gives another image is refused; an unreachable, refusing, size-limited or silent registry
 * fails, named, in bounded time; `worldline push` records a dataset's images in images.json and `imageForTask` pulls through it.
 */
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { createServer as createHttpServer } from 'node:http';
import { createServer, type Server, type Socket } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { freePort } from '../bench/redis_server.js';
import { writeDataset } from '../datasets/dataset_writer.js';
import { buildImage, inspectImage, removeImage, tarStream } from '../pipeline/sandbox/engine.js';
import { ENV_REPOSITORY, ensureImage, IMAGES_FILE, type ImagesFile, imageForTask, pushImage, RegistryError } from '../pipeline/sandbox/registry.js';
import { tasksSchema } from '../schemas/index.js';
import { knownRows } from './fixtures/known_dataset.js';
import { RegistryServer } from './fixtures/registry_server.js';
import { cli, tempDir, writeTree } from './helpers.js';

let registry: RegistryServer;
let work: string;
let baseId: string;
/** This file's own image: a layer of its own over the base, so no other test's image is touched. */
let image: { tag: string; id: string };

beforeAll(async () => {
  work = tempDir('registry');
  registry = await RegistryServer.start(join(work, 'registry'));
  baseId = (await inspectImage(inject('base311')))!.Id;
  const context = writeTree(join(work, 'image'), {
    Dockerfile: `FROM ${baseId}\nCOPY stamp /stamp\nLABEL worldline.base=${baseId}\n`,
    stamp: randomBytes(16).toString('hex'),
  });
  const tag = `worldline-test/registry:${randomBytes(6).toString('hex')}`;
  const built = await buildImage({
    context: () => tarStream(['-C', context, 'Dockerfile', 'stamp']),
    tag,
    logFile: join(work, 'build.log'),
    timeoutMs: 120_000,
    memoryBytes: 512 << 20,
    cpus: 1,
  });
  expect(built.error).toBeNull();
  image = { tag, id: built.imageId! };
});

afterAll(async () => {
  // Only this file's image, by id (every tag it got here goes with it); the base stays.
  if (image) await removeImage(image.id);
  await registry?.stop();
});

const pinned = (digest: string) => `${registry.host}/${ENV_REPOSITORY}@${digest}`;

describe('push and pull by digest', () => {
  let digest: string;

  it('a push and a pull from a loopback registry give the same image id and manifest digest', async () => {
    const pushed = await pushImage(image.tag, registry.host);
    expect(pushed.imageId).toBe(image.id);
    expect(pushed.digest).toMatch(/^sha256:[0-9a-f]{64}$/);
    expect(pushed.reference).toMatch(new RegExp(`^${registry.host}/${ENV_REPOSITORY}:[0-9a-f]{64}$`));
    digest = pushed.digest;
    // The registry serves that manifest under that digest.
    const manifest = await fetch(`http://${registry.host}/v2/${ENV_REPOSITORY}/manifests/${digest}`, {
      headers: { accept: 'application/vnd.docker.distribution.manifest.v2+json' },
    });
    expect(manifest.status).toBe(200);
    expect(manifest.headers.get('docker-content-digest')).toBe(digest);
    expect(((await manifest.json()) as { config: { digest: string } }).config.digest).toBe(image.id);

    await removeImage(image.id);
    expect(await inspectImage(image.id)).toBeNull();
    expect(await ensureImage(image.id, pinned(digest))).toBe(image.id);
    const pulled = await inspectImage(image.id);
    expect(pulled?.Id).toBe(image.id);
    expect(pulled?.RepoDigests).toContain(pinned(digest));
    // Present: nothing to do, no registry needed.
    expect(await ensureImage(image.id)).toBe(image.id);
  }, 300_000);

  it('refuses a pulled image whose id is not the expected one, naming both', async () => {
    const wrong = `sha256:${'0'.repeat(64)}`;
    const e = await ensureImage(wrong, pinned(digest)).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(RegistryError);
    expect((e as RegistryError).kind).toBe('mismatch');
    expect((e as Error).message).toContain(wrong);
    expect((e as Error).message).toContain(image.id);
  }, 120_000);

  it('refuses a pull by tag: only a digest names one image', async () => {
    const e = await ensureImage(`sha256:${'1'.repeat(64)}`, `${registry.host}/${ENV_REPOSITORY}:latest`).catch((x: unknown) => x);
    expect((e as Error).message).toMatch(/pull by manifest digest/);
  });
});

describe('a registry that is not there', () => {
  it('an unreachable registry is named, fast', async () => {
    const closed = `127.0.0.1:${await freePort()}`;
    const started = Date.now();
    const e = await pushImage(image.id, closed, { timeoutMs: 30_000 }).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(RegistryError);
    expect((e as RegistryError).kind, (e as Error).message).toBe('unreachable');
    expect((e as Error).message).toContain(`registry ${closed} unreachable`);
    expect(Date.now() - started).toBeLessThan(30_000);
  }, 60_000);

  it('a registry that refuses pushes (read-only) is named, and so is one that says the image is too large', async () => {
    const readonly = await RegistryServer.start(join(work, 'readonly'), { readonly: true });
    try {
      const e = await pushImage(image.id, readonly.host).catch((x: unknown) => x);
      expect((e as RegistryError).kind, (e as Error).message).toBe('refused');
      expect((e as Error).message).toContain(`registry ${readonly.host} refused`);
    } finally {
      await readonly.stop();
    }
    // A registry behind a proxy with a body limit: it takes the handshake, then answers 413 to the upload.
    const limited = createHttpServer((req, res) => {
      if (req.url === '/v2/') res.writeHead(200, { 'docker-distribution-api-version': 'registry/2.0' }).end('{}');
      else if (req.method === 'HEAD') res.writeHead(404).end();
      else res.writeHead(413, { 'content-type': 'text/plain' }).end('request entity too large');
    });
    await new Promise<void>((r) => limited.listen(0, '127.0.0.1', r));
    const host = `127.0.0.1:${(limited.address() as { port: number }).port}`;
    try {
      const e = await pushImage(image.id, host).catch((x: unknown) => x);
      expect((e as RegistryError).kind, (e as Error).message).toBe('size');
      expect((e as Error).message).toContain(`registry ${host} refused for size`);
    } finally {
      limited.close();
    }
  }, 120_000);

  it('a registry that accepts and never answers is given up on in bounded time', async () => {
    const sockets: Socket[] = [];
    const silent: Server = createServer((s) => sockets.push(s));
    await new Promise<void>((r) => silent.listen(0, '127.0.0.1', r));
    const host = `127.0.0.1:${(silent.address() as { port: number }).port}`;
    try {
      const started = Date.now();
      const e = await ensureImage(`sha256:${'2'.repeat(64)}`, `${host}/${ENV_REPOSITORY}@sha256:${'3'.repeat(64)}`, { idleMs: 3000 }).catch((x: unknown) => x);
      expect(e).toBeInstanceOf(RegistryError);
      expect((e as RegistryError).kind).toBe('timeout');
      expect((e as Error).message).toMatch(new RegExp(`registry ${host}: the pull of .* stopped, no answer in 3 s`));
      expect(Date.now() - started).toBeLessThan(20_000);
    } finally {
      for (const s of sockets) s.destroy();
      silent.close();
    }
  }, 60_000);
});

describe('worldline push over a dataset', () => {
  it("pushes the tasks' images and their base, records them in images.json, and imageForTask pulls through it", async () => {
    const missing = `sha256:${'f'.repeat(64)}`;
    const tasks = knownRows()
      .tasks.slice(0, 3)
      .map((t, i) => ({ ...t, image_id: i < 2 ? image.id : missing }));
    const dataset = join(tempDir('push'), 'dataset');
    await writeDataset(dataset, [{ schema: tasksSchema, rows: tasks }], { rowGroupRows: 16 });

    const r = await cli(['push', '--dataset', dataset, '--registry', registry.host, '--json']);
    expect(r.code, r.stderr).toBe(1);
    const report = JSON.parse(r.stdout) as { pushed: { image_id: string; digest: string }[]; failed: { image_id: string; error: string }[] };
    expect(report.pushed.map((p) => p.image_id).sort()).toEqual([baseId, image.id].sort());
    expect(report.failed).toEqual([{ image_id: missing, error: expect.stringContaining(`image ${missing} (1 task(s))`) }]);
    expect(report.failed[0].error).toContain('not on this engine');

    const file = JSON.parse(readFileSync(join(dataset, IMAGES_FILE), 'utf8')) as ImagesFile;
    expect(Object.keys(file.images).sort()).toEqual([baseId, image.id].sort());
    const entry = file.images[image.id];
    expect(entry.reference.startsWith(`${registry.host}/${ENV_REPOSITORY}:`)).toBe(true);
    expect(entry.digest).toMatch(/^sha256:[0-9a-f]{64}$/);
    expect(entry.bytes).toBeGreaterThan(0);
    expect(existsSync(join(dataset, 'manifest.json'))).toBe(true);
    // The registry's names were for the push: the shared base does not keep one per registry.
    expect((await inspectImage(baseId))?.RepoTags?.filter((t) => t.startsWith(`${registry.host}/`))).toEqual([]);

    // A rollout host: the image is not here; the dataset and the registry are.
    await removeImage(image.id);
    expect(await imageForTask(dataset, tasks[0])).toBe(image.id);
    const pulled = await inspectImage(image.id);
    expect(pulled?.RepoDigests).toContain(`${registry.host}/${ENV_REPOSITORY}@${entry.digest}`);
    // Tagged as pushed, so no prune of untagged images takes it.
    expect(pulled?.RepoTags).toContain(entry.reference);

    // The same registry by another name (serve --registry): the digest finds the same image there.
    await removeImage(image.id);
    const byName = `localhost:${registry.host.split(':')[1]}`;
    expect(await imageForTask(dataset, tasks[1], { registry: byName })).toBe(image.id);
    expect((await inspectImage(image.id))?.RepoDigests).toContain(`${byName}/${ENV_REPOSITORY}@${entry.digest}`);

    const e = await imageForTask(dataset, tasks[2]).catch((x: unknown) => x);
    expect((e as RegistryError).kind).toBe('missing');
    expect((e as Error).message).toContain(`${IMAGES_FILE} does not list it`);
  }, 600_000);

  it('a registry that is not HOST[:PORT] is a usage error', async () => {
    const dataset = join(tempDir('push-usage'), 'dataset');
    await writeDataset(dataset, [{ schema: tasksSchema, rows: knownRows().tasks.slice(0, 1) }]);
    const r = await cli(['push', '--dataset', dataset, '--registry', 'myregistry']);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('a bare name is a Docker Hub user');
  }, 60_000);
});
