/**
 * Containers: every container Worldline starts is made here. `runSandboxed` is the one way a
 * repository's code runs for a stage (validate, trace, mutant checks, issue verification,
 * traces around a fix, grading): the unit's image, our Python read-only at /worldline/lib, a
 * work folder at /worldline/out for scripts in and results out, the standard environment, the
 * run's resource limits and no network. `SandboxSession` is a long-lived container the agent's
 * tools exec into. `runContainer` is the bare form both build on.
 */

import type { Readable } from 'node:stream';
import type Docker from 'dockerode';
import { docker, OWNER_LABEL } from './engine.js';
import { tracersDir } from './tracers.js';

export interface RunLimits {
  memoryBytes: number;
  pids: number;
  cpus: number;
}

export interface RunResult {
  exitCode: number | null;
  timedOut: boolean;
  /** The engine's word that the out-of-memory killer struck; exit 137 alone may be any SIGKILL. */
  oomKilled: boolean;
  output: string;
}

/**
 * What every container gets: no network, the limits, and no way to gain privileges: every
 * capability dropped (no mknod, chown of others' files, raw sockets or mounts) and setuid
 * binaries powerless (no-new-privileges).
 */
function hostConfig(binds: string[], limits: RunLimits): Docker.ContainerCreateOptions['HostConfig'] {
  return {
    NetworkMode: 'none',
    Binds: binds,
    Memory: limits.memoryBytes,
    MemorySwap: limits.memoryBytes,
    PidsLimit: limits.pids,
    NanoCpus: Math.round(limits.cpus * 1e9),
    CapDrop: ['ALL'],
    SecurityOpt: ['no-new-privileges'],
  };
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
    Labels: { 'worldline.role': 'run', ...opts.labels, ...OWNER_LABEL },
    NetworkDisabled: true,
    HostConfig: hostConfig(opts.binds ?? [], opts.limits),
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
    const oomKilled = (await container.inspect().catch(() => null))?.State?.OOMKilled ?? false;
    return { exitCode, timedOut, oomKilled, output };
  } finally {
    await container.remove({ force: true }).catch(() => undefined);
  }
}

/** The limits a run's options set for every container of a unit. */
export interface SandboxLimits {
  memoryMb: number;
  pids: number;
  cpus: number;
}

const toRunLimits = (l: SandboxLimits): RunLimits => ({ memoryBytes: l.memoryMb * 1024 * 1024, pids: l.pids, cpus: l.cpus });

/**
 * The environment every sandboxed run gets, over the unit's own `vars`: our Python first on the
 * import path (then the repository's src/ when it has that layout), hashing and time zone fixed
 * so a run is reproducible, no bytecode written into the checkout.
 */
function standardEnv(vars: Record<string, string>, srcLayout: boolean, extra: Record<string, string> = {}): Record<string, string> {
  return {
    ...vars,
    PYTHONPATH: [srcLayout ? '/worldline/lib:/repo/src' : '/worldline/lib', vars.PYTHONPATH].filter(Boolean).join(':'),
    PYTHONHASHSEED: '0',
    PYTHONDONTWRITEBYTECODE: '1',
    TZ: 'UTC',
    ...extra,
  };
}

export interface SandboxSpec {
  image: string;
  cmd: string[];
  /** The host folder the container sees as /worldline/out. */
  work: string;
  /** The unit's `env.vars`. */
  vars: Record<string, string>;
  srcLayout: boolean;
  /** Variables of this run (the tracer's knobs), set over the standard ones. */
  env?: Record<string, string>;
  limits: SandboxLimits;
  timeoutMs: number;
  labels: Record<string, string>;
}

/** Runs repository code for a stage, the one standard way (see the top of this file). */
export function runSandboxed(spec: SandboxSpec): Promise<RunResult> {
  return runContainer({
    image: spec.image,
    cmd: spec.cmd,
    env: standardEnv(spec.vars, spec.srcLayout, spec.env),
    binds: [`${tracersDir}:/worldline/lib:ro`, `${spec.work}:/worldline/out`],
    limits: toRunLimits(spec.limits),
    timeoutMs: spec.timeoutMs,
    labels: spec.labels,
  });
}

/**
 * A long-lived container (the agent's environment): started idle, commands exec'd into it
 * bounded in time and output, files put in as a tar stream, removed by `close`.
 */
export class SandboxSession {
  private constructor(private readonly container: Docker.Container) {}

  static async start(opts: { image: string; env: Record<string, string>; limits: SandboxLimits; labels: Record<string, string> }): Promise<SandboxSession> {
    const limits = toRunLimits(opts.limits);
    const container = await docker().createContainer({
      Image: opts.image,
      Cmd: ['sleep', 'infinity'],
      Env: Object.entries(opts.env).map(([k, v]) => `${k}=${v}`),
      WorkingDir: '/repo',
      NetworkDisabled: true,
      Labels: { ...opts.labels, ...OWNER_LABEL },
      HostConfig: hostConfig([`${tracersDir}:/worldline/lib:ro`], limits),
    });
    const session = new SandboxSession(container);
    try {
      await container.start();
    } catch (e) {
      await session.close();
      throw e;
    }
    return session;
  }

  /** Extracts a tar stream into a folder of the container. */
  async putArchive(tar: Readable, path: string): Promise<void> {
    await this.container.putArchive(tar, { path });
  }

  /** Runs a command in /repo under `timeout`, keeping the first `cap` characters of its output. */
  async exec(cmd: string[], timeoutS: number, cap: number): Promise<{ output: string; exitCode: number | null }> {
    const ex = await this.container.exec({
      Cmd: ['timeout', '-k', '5', String(timeoutS), ...cmd],
      AttachStdout: true,
      AttachStderr: true,
      WorkingDir: '/repo',
    });
    const stream = await ex.start({ hijack: true, stdin: false });
    let output = '';
    let dropped = 0;
    const sink = {
      write: (chunk: Buffer) => {
        if (output.length < cap) output += chunk.toString('utf8');
        else dropped += chunk.length;
        return true;
      },
    };
    docker().modem.demuxStream(stream, sink as unknown as NodeJS.WritableStream, sink as unknown as NodeJS.WritableStream);
    await new Promise<void>((resolve) => {
      stream.on('end', resolve);
      stream.on('close', resolve);
      stream.on('error', () => resolve());
    });
    if (output.length > cap) output = output.slice(0, cap);
    if (dropped || output.length >= cap) output += `\n[output capped at ${cap} characters]`;
    const info = await ex.inspect();
    return { output, exitCode: info.ExitCode ?? null };
  }

  async close(): Promise<void> {
    await this.container.remove({ force: true }).catch(() => undefined);
  }
}
