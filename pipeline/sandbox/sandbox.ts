/** Every Docker Engine call the program makes goes through here, on dockerode. */
import Docker from 'dockerode';
import { createWriteStream } from 'node:fs';
import { spawn } from 'node:child_process';
import type { Readable } from 'node:stream';

let client: Docker | undefined;

export function docker(): Docker {
  client ??= new Docker({ socketPath: process.env.DOCKER_SOCKET ?? '/var/run/docker.sock' });
  return client;
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
 * Builds from a context folder with host networking (the only network these machines have),
 * streaming the build output to `logFile`. The build is cancelled at `timeoutMs`.
 */
export async function buildImage(opts: {
  context: Readable;
  tag: string;
  logFile: string;
  timeoutMs: number;
  labels?: Record<string, string>;
}): Promise<BuildResult> {
  const log = createWriteStream(opts.logFile);
  const controller = new AbortController();
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    controller.abort();
  }, opts.timeoutMs);
  let lastError: string | null = null;
  try {
    const stream = await docker().buildImage(opts.context, {
      t: opts.tag,
      networkmode: 'host',
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
    await new Promise((r) => log.end(r));
  }
  if (timedOut) return { ok: false, error: `build exceeded its timeout of ${Math.round(opts.timeoutMs / 1000)} s`, imageId: null, timedOut };
  if (lastError) return { ok: false, error: lastError, imageId: null, timedOut };
  const info = await inspectImage(opts.tag);
  if (!info) return { ok: false, error: 'the build reported success but no image was tagged', imageId: null, timedOut };
  return { ok: true, error: null, imageId: info.Id, timedOut };
}

export interface RunLimits {
  memoryBytes: number;
  pids: number;
  cpus: number;
}

export interface RunResult {
  exitCode: number | null;
  timedOut: boolean;
  output: string;
}

/**
 * Runs a command to completion in a fresh container with no network and resource limits,
 * killing it at `timeoutMs`. Output is capped so a chatty suite cannot exhaust memory.
 */
export async function runContainer(opts: {
  image: string;
  cmd: string[];
  env?: Record<string, string>;
  binds?: string[];
  workdir?: string;
  limits: RunLimits;
  timeoutMs: number;
  outputCap?: number;
  labels?: Record<string, string>;
}): Promise<RunResult> {
  const cap = opts.outputCap ?? 1 << 20;
  const container = await docker().createContainer({
    Image: opts.image,
    Cmd: opts.cmd,
    Env: Object.entries(opts.env ?? {}).map(([k, v]) => `${k}=${v}`),
    WorkingDir: opts.workdir,
    Labels: { 'worldline.role': 'run', ...opts.labels },
    NetworkDisabled: true,
    HostConfig: {
      NetworkMode: 'none',
      Binds: opts.binds,
      Memory: opts.limits.memoryBytes,
      MemorySwap: opts.limits.memoryBytes,
      PidsLimit: opts.limits.pids,
      NanoCpus: Math.round(opts.limits.cpus * 1e9),
      AutoRemove: false,
    },
  });
  let output = '';
  let dropped = 0;
  try {
    const stream = await container.attach({ stream: true, stdout: true, stderr: true });
    const sink = {
      write(chunk: Buffer) {
        if (output.length < cap) output += chunk.toString('utf8');
        else dropped += chunk.length;
        return true;
      },
    };
    docker().modem.demuxStream(stream, sink as unknown as NodeJS.WritableStream, sink as unknown as NodeJS.WritableStream);
    await container.start();
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      container.kill().catch(() => undefined);
    }, opts.timeoutMs);
    let exitCode: number | null = null;
    try {
      const res = (await container.wait()) as { StatusCode: number };
      exitCode = res.StatusCode;
    } finally {
      clearTimeout(timer);
    }
    if (dropped) output += `\n[worldline: ${dropped} more bytes of output dropped]\n`;
    return { exitCode, timedOut, output };
  } finally {
    await container.remove({ force: true }).catch(() => undefined);
  }
}
