/**
 * Containers: every container Worldline starts is made here. `runSandboxed` is the one way a
 * repository's code runs for a stage (validate, trace, mutant checks, issue verification,
 * traces around a fix, grading; `holdSandboxed` is the same run with its container made ahead): the unit's image, our Python read-only at /worldline/lib, a
 * work folder at /worldline/out for scripts in and results out, the standard environment, the
 * run's resource limits and no network. `SandboxSession` is a long-lived container the agent's
 * tools exec into. `runContainer` is the bare form both build on.
 *
 * A command that starts with OUR_PYTHON runs on our own interpreter (our_python.ts), not the
 * image's, as the container's own first process (no shell of the image's before it: it copies the
 * checkout itself, after it took what it must hold, tracers/worldline_runs.py), with an
 * environment of ours: the unit's variables reach the suite's runs only (in
 * /worldline/out/suite-env.json), never our process, where LD_PRELOAD and the like would act first.
 */

import { chmodSync, chownSync, mkdirSync, mkdtempSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import type Docker from 'dockerode';
import { JOB_LABEL, OUT_LABEL, onEngineLoss } from '../runtime/job_scope.js';
import { DEFAULTS } from '../runtime/options.js';
import { docker, engineDisturbedBy, newContainer, tarStream } from './engine.js';
import { OFFLINE_VARS } from './offline_vars.js';
import { emptyFile, expandOurPython, libDir, OUR_PYTHON, type OurPython, ourEnv, ourPython, suiteEnvChange } from './our_python.js';
import { ToolServer } from './tool_server.js';
import { tracersDir } from './tracers.js';
import { onWorkDisk } from './work_disk.js';

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
 * The unprivileged user every container runs as. Builds give it a name in /etc/passwd and own
 * the pristine checkout by it; base images run it nameless (nothing there needs a name).
 */
export const SANDBOX_UID = 10001;
/** Where a built environment keeps its checkout; each container copies it to its own /repo. */
export const PRISTINE_REPO = '/opt/worldline/repo';
/**
 * Per-container disk budget: /repo and /tmp (also HOME) are memory-backed file systems of these
 * sizes, gone with the container; the root file system is read-only, so nothing else is
 * writable but the work folder, its own disk of `--work-disk` MB (work_disk.ts); RLIMIT_FSIZE
 * bounds each file.
 */
export const DISK_BUDGET = { repoMb: 2048, tmpMb: 1024, fileBytes: 1 << 30 };
const OPEN_FILES = 4096;
/**
 * Every container's host name: Docker's default (the container id) shows in os.environ, and so in
 * traced locals, which would make two runs of the same unit differ.
 */
const SANDBOX_HOSTNAME = 'worldline';

/**
 * What every container gets: no network, the limits, and no way to gain privileges: a non-root
 * user, every capability dropped (no mknod, chown of others' files, raw sockets or mounts),
 * setuid binaries powerless (no-new-privileges), a read-only root file system (a test cannot
 * change the interpreter, site-packages or /etc for a later run), size-limited nosuid/nodev
 * scratch file systems, file-size and open-file limits, an init that reaps and forwards signals,
 * no engine log (output a test prints never lands on the host's disk), and an empty
 * /etc/ld.so.preload (the build may have written one: every program would load it first).
 */
function hostConfig(binds: string[], limits: RunLimits): Docker.ContainerCreateOptions['HostConfig'] {
  const scratch = (mb: number) => `rw,exec,nosuid,nodev,size=${mb}m,uid=${SANDBOX_UID},gid=${SANDBOX_UID},mode=0755`;
  return {
    NetworkMode: 'none',
    Binds: [...binds, `${emptyFile()}:/etc/ld.so.preload:ro`],
    Memory: limits.memoryBytes,
    MemorySwap: limits.memoryBytes,
    PidsLimit: limits.pids,
    NanoCpus: Math.round(limits.cpus * 1e9),
    CapDrop: ['ALL'],
    SecurityOpt: ['no-new-privileges'],
    ReadonlyRootfs: true,
    Tmpfs: { '/tmp': scratch(DISK_BUDGET.tmpMb), '/repo': scratch(DISK_BUDGET.repoMb) },
    Ulimits: [
      { Name: 'fsize', Soft: DISK_BUDGET.fileBytes, Hard: DISK_BUDGET.fileBytes },
      { Name: 'nofile', Soft: OPEN_FILES, Hard: OPEN_FILES },
      { Name: 'core', Soft: 0, Hard: 0 },
    ],
    Init: true,
    LogConfig: { Type: 'none', Config: {} },
  };
}

/** The environment every container starts with; HOME is scratch, so nothing a run writes there persists. */
const BASE_ENV = { HOME: '/tmp', USER: 'worldline' };
/**
 * The image's variables our processes keep (ourEnv sets the rest empty): BASE_ENV's, ours over
 * the image's, and PATH, which finds the image's programs we start (cp, sh), never our interpreter.
 */
const KEPT = ['PATH', ...Object.keys(BASE_ENV)];

/** Copies the environment's pristine checkout into the container's own /repo (absent in base images). */
const PREPARE_REPO = `if [ -d ${PRISTINE_REPO} ]; then cp -a ${PRISTINE_REPO}/. /repo/; fi`;

/**
 * A fresh work folder under `base` (a new name each run, so a late container of an earlier run
 * never writes into this one's), writable by the sandbox user.
 */
export function freshWork(base: string): string {
  mkdirSync(dirname(base), { recursive: true });
  const work = mkdtempSync(`${base}-`);
  claimWork(work);
  return work;
}

/** Hands a host folder or file to the sandbox user: its owner when we are root, else open to all. */
export function claimWork(path: string): void {
  if (process.getuid?.() === 0) chownSync(path, SANDBOX_UID, SANDBOX_UID);
  else chmodSync(path, statSync(path).isDirectory() ? 0o777 : 0o666);
}

/** Seconds the engine has to report a container's end after we killed it (at its timeout). */
const KILL_ANSWER_S = 60;

/**
 * Starts a created container with its output going to `onOutput` (and, with `stdin`, a stream to
 * write to its standard input); `finish` kills it `timeoutMs` after it is called and says how it
 * ended (out of memory only when the engine says so).
 */
async function attachAndStart(
  container: Docker.Container,
  onOutput: (chunk: Buffer) => void,
  stdin = false,
): Promise<{ input: NodeJS.WritableStream; finish(timeoutMs: number): Promise<{ exitCode: number; timedOut: boolean; oomKilled: boolean }> }> {
  const stream = await container.attach({ stream: true, stdout: true, stderr: true, ...(stdin ? { stdin: true, hijack: true } : {}) });
  const sink = {
    write: (chunk: Buffer) => {
      onOutput(chunk);
      return true;
    },
  };
  docker().modem.demuxStream(stream, sink as unknown as NodeJS.WritableStream, sink as unknown as NodeJS.WritableStream);
  const startedS = Math.floor(Date.now() / 1000);
  await container.start();
  return {
    input: stream,
    async finish(timeoutMs) {
      let timedOut = false;
      // An engine killed mid-wait leaves the wait's response unfinished, and it would never settle.
      let lost!: (e: Error) => void;
      const gone = new Promise<never>((_, reject) => {
        lost = reject;
      });
      gone.catch(() => undefined);
      const unlisten = onEngineLoss((why) => lost(new Error(`the Docker Engine went away while the container ran (${why})`)));
      let unanswered: NodeJS.Timeout | undefined;
      const timer = setTimeout(() => {
        timedOut = true;
        container.kill().catch(() => undefined);
        unanswered = setTimeout(
          () => lost(new Error(`the engine did not report the container's end ${KILL_ANSWER_S} s after it was killed`)),
          KILL_ANSWER_S * 1000,
        );
      }, timeoutMs);
      const exitCode = (
        (await Promise.race([container.wait(), gone]).finally(() => {
          clearTimeout(timer);
          clearTimeout(unanswered);
          unlisten();
        })) as { StatusCode: number }
      ).StatusCode;
      const oomKilled = (await container.inspect().catch(() => null))?.State?.OOMKilled ?? false;
      // Dead of a signal that was neither ours nor the out-of-memory killer's: a stopping engine's?
      if (exitCode > 128 && !timedOut && !oomKilled) await engineDisturbedBy(container.id, startedS);
      return { exitCode, timedOut, oomKilled };
    },
  };
}

async function startAndWait(container: Docker.Container, timeoutMs: number, onOutput: (chunk: Buffer) => void) {
  return (await attachAndStart(container, onOutput)).finish(timeoutMs);
}

interface ContainerRun {
  image: string;
  cmd: string[];
  env?: Record<string, string>;
  binds?: string[];
  workdir?: string;
  limits: RunLimits;
  timeoutMs: number;
  outputCap?: number;
  labels?: Record<string, string>;
  /** The command is the container's first process as it is (our runner: it copies the checkout and waits for `go` itself). */
  direct?: boolean;
}

/**
 * Creates a run's container: `gate` (a shell command) runs after the checkout is in and before the
 * command, which then gets /dev/null as its standard input as any run's does (a direct command
 * reads the gate's line itself).
 */
function createRunContainer(opts: Omit<ContainerRun, 'timeoutMs'>, gate?: string): Promise<Docker.Container> {
  const start = gate ? `${PREPARE_REPO} && ${gate} && exec "$@" </dev/null` : `${PREPARE_REPO} && exec "$@"`;
  return newContainer({
    Image: opts.image,
    // Every container has its own empty /repo: the checkout goes in before the command runs.
    Cmd: opts.direct ? opts.cmd : ['sh', '-c', start, 'sh', ...opts.cmd],
    Env: Object.entries({ ...BASE_ENV, ...opts.env }).map(([k, v]) => `${k}=${v}`),
    User: `${SANDBOX_UID}:${SANDBOX_UID}`,
    Hostname: SANDBOX_HOSTNAME,
    WorkingDir: opts.workdir,
    Labels: { 'worldline.role': 'run', ...opts.labels },
    NetworkDisabled: true,
    ...(gate ? { OpenStdin: true, StdinOnce: true } : {}),
    HostConfig: hostConfig(opts.binds ?? [], opts.limits),
  });
}

/** Collects a run's output up to `cap` characters, and says how much more was dropped. */
function outputCollector(cap: number) {
  let output = '';
  let dropped = 0;
  return {
    add(chunk: Buffer) {
      if (output.length < cap) output += chunk.toString('utf8');
      else dropped += chunk.length;
    },
    text: () => (dropped ? `${output}\n[worldline: ${dropped} more bytes of output dropped]\n` : output),
  };
}

/**
 * Runs a command to completion in a fresh container with no network and resource limits,
 * killing it at `timeoutMs`. Output is capped so a chatty suite cannot exhaust memory.
 */
export async function runContainer(opts: ContainerRun): Promise<RunResult> {
  const container = await createRunContainer(opts);
  const output = outputCollector(opts.outputCap ?? 1 << 20);
  try {
    const { exitCode, timedOut, oomKilled } = await startAndWait(container, opts.timeoutMs, (chunk) => output.add(chunk));
    return { exitCode, timedOut, oomKilled, output: output.text() };
  } finally {
    await container.remove({ force: true, v: true }).catch(() => undefined);
  }
}

/** The limits a run's options set for every container of a unit. */
export interface SandboxLimits {
  memoryMb: number;
  pids: number;
  cpus: number;
  /** The work folder's disk budget, MB. */
  workDiskMb?: number;
}

const toRunLimits = (l: SandboxLimits): RunLimits => ({ memoryBytes: l.memoryMb * 1024 * 1024, pids: l.pids, cpus: l.cpus });

/**
 * The environment every sandboxed run gets, over the unit's own `vars`: model hubs said offline
 * (offline_vars.ts) unless the unit says otherwise, the repository's src/ on the import path when
 * it has that layout, hashing and time zone fixed so a run is reproducible, no bytecode written
 * into the checkout. Our own Python is never on PYTHONPATH: our programs find
 * their modules beside them (/worldline/lib is a script's sys.path[0]), and a test's subprocess,
 * or a test itself, must not find a module of ours by accident (worldline_pytest.py takes
 * /worldline/lib off sys.path too).
 */
function standardEnv(vars: Record<string, string>, srcLayout: boolean, extra: Record<string, string> = {}): Record<string, string> {
  const pythonPath = [srcLayout ? '/repo/src' : '', vars.PYTHONPATH].filter(Boolean).join(':');
  return {
    ...OFFLINE_VARS,
    ...vars,
    ...(pythonPath ? { PYTHONPATH: pythonPath } : {}),
    PYTHONHASHSEED: '0',
    PYTHONDONTWRITEBYTECODE: '1',
    // A .pth a test drops in ~/.local would run in every later interpreter of the container.
    PYTHONNOUSERSITE: '1',
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
  /** false: no /worldline/lib at all (plain pytest, the reference our runs are compared with). */
  ourCode?: boolean;
}

/**
 * A sandboxed run's container, the one standard way. A command of OUR_PYTHON's gets our
 * environment and the suite's in its work folder (written here: `spec.work` is mounted by now); a
 * command of the caller's (a shell, which may start our runner itself) gets the suite's, as plain
 * pytest does.
 */
async function sandboxedRun(spec: Omit<SandboxSpec, 'timeoutMs'>, held: boolean): Promise<Omit<ContainerRun, 'timeoutMs'>> {
  const suite = standardEnv(spec.vars, spec.srcLayout, spec.env);
  const run = { image: spec.image, cmd: spec.cmd, env: suite, binds: [`${spec.work}:/worldline/out`], limits: toRunLimits(spec.limits), labels: spec.labels };
  if (spec.ourCode === false) return run;
  run.binds.push(`${libDir()}:/worldline/lib:ro`);
  if (!spec.cmd.includes(OUR_PYTHON)) return run;
  const py = await ourPython(spec.image);
  run.binds.push(...py.binds);
  run.cmd = expandOurPython(spec.cmd, py.argv);
  if (spec.cmd[0] !== OUR_PYTHON) return run;
  const env = { ...ourEnv(py.imageEnv, KEPT), WORLDLINE_BOOT: held ? 'gate,prepare' : 'prepare' };
  const envFile = join(spec.work, 'suite-env.json');
  writeFileSync(envFile, JSON.stringify(suiteEnvChange(py.imageEnv, suite, Object.keys(env))));
  claimWork(envFile);
  return { ...run, env, direct: true };
}

/**
 * Runs repository code for a stage, the one standard way (see the top of this file), its work
 * folder on a nosuid,nodev disk of `limits.workDiskMb` (work_disk.ts).
 */
export function runSandboxed(spec: SandboxSpec): Promise<RunResult> {
  claimWork(spec.work);
  return onWorkDisk(spec.work, spec.limits.workDiskMb ?? DEFAULTS.workDiskMb, SANDBOX_UID, async () =>
    runContainer({ ...(await sandboxedRun(spec, false)), timeoutMs: spec.timeoutMs }),
  );
}

/** A sandboxed run whose container is made and started ahead, held before its command. */
export interface HeldRun {
  /** Lets the command run (its inputs are in the work folder by now), killed `timeoutMs` from this call. */
  go(timeoutMs: number): Promise<RunResult>;
  /** Removes the container unused and gives the work folder's disk back. */
  cancel(): Promise<void>;
}

/**
 * `runSandboxed`, started ahead: the container is made and started, its work folder put on its
 * disk and its checkout copied, while the caller does other work; then it waits, running nothing,
 * until `go` (a line on its standard input), and runs `spec.cmd` as runSandboxed would. Nothing
 * but our own start-up has run in it, so it is as fresh as one made at `go`. The work folder is
 * mounted when this resolves: the run's inputs are written into it after that, before `go`.
 */
export async function holdSandboxed(spec: Omit<SandboxSpec, 'timeoutMs'>): Promise<HeldRun> {
  claimWork(spec.work);
  let hold!: (run: HeldRun) => void;
  const held = new Promise<HeldRun>((resolve) => {
    hold = resolve;
  });
  const run = onWorkDisk(spec.work, spec.limits.workDiskMb ?? DEFAULTS.workDiskMb, SANDBOX_UID, async () => {
    // Until `go`, the gate reads its standard input; no line (the stream closed) means the run is off.
    const container = await createRunContainer(await sandboxedRun(spec, true), 'read -r go');
    try {
      const output = outputCollector(1 << 20);
      const started = await attachAndStart(container, (chunk) => output.add(chunk), true);
      const timeoutMs = await new Promise<number | null>((resolve) =>
        hold({
          go: (t) => {
            resolve(t);
            return finished();
          },
          cancel: async () => {
            resolve(null);
            await run.catch(() => undefined);
          },
        }),
      );
      if (timeoutMs === null) return null;
      started.input.write('go\n');
      const { exitCode, timedOut, oomKilled } = await started.finish(timeoutMs);
      return { exitCode, timedOut, oomKilled, output: output.text() };
    } finally {
      await container.remove({ force: true, v: true }).catch(() => undefined);
    }
  });
  const finished = async (): Promise<RunResult> => {
    const result = await run;
    if (!result) throw new Error('the held run was cancelled');
    return result;
  };
  // A failure before the container is held (the disk, the engine) is the caller's at once; after
  // it, the run's outcome is go's or cancel's to report.
  const early = run.then(() => {
    throw new Error('the held run ended before it was let go');
  });
  early.catch(() => undefined);
  return Promise.race([held, early]);
}

/**
 * Output as the session returns it: the first `cap` characters, and a note when there were more
 * (`dropped` bytes beyond those received).
 */
function capOutput(output: string, dropped: number, cap: number): string {
  const kept = output.length > cap ? output.slice(0, cap) : output;
  return dropped || kept.length >= cap ? `${kept}\n[output capped at ${cap} characters]` : kept;
}

/**
 * A long-lived container (the agent's environment): started idle, commands run in it bounded in
 * time and output (through its tool server while that lives, else one exec each), removed by `close`.
 * The container's own environment holds none of `env` (the unit's variables): each command gets
 * them (an exec's own environment, or the tool server's word), our processes (the tool server, a
 * command of OUR_PYTHON's) never do.
 */
export class SandboxSession {
  private server: ToolServer | null = null;
  /** The environment of our processes in it (the tool server, a command of OUR_PYTHON's). */
  private readonly ours: Record<string, string>;

  private constructor(
    private readonly container: Docker.Container,
    private readonly py: OurPython,
    private readonly env: Record<string, string>,
  ) {
    this.ours = ourEnv(py.imageEnv, KEPT);
  }

  /**
   * `setup`: a script (with its arguments as $1..) run in /repo once it is copied, in the same
   * command (the tool server's first, else one exec): each exec is three round trips to the engine.
   */
  static async start(opts: {
    image: string;
    env: Record<string, string>;
    limits: SandboxLimits;
    labels: Record<string, string>;
    setup?: { script: string; args: string[] };
    /** Start the tool server (tracers/tool_server.py) beside the setup, for the commands after it. */
    toolServer?: boolean;
  }): Promise<SandboxSession> {
    const limits = toRunLimits(opts.limits);
    const py = await ourPython(opts.image);
    const container = await newContainer({
      Image: opts.image,
      Cmd: ['sleep', 'infinity'],
      Env: Object.entries(BASE_ENV).map(([k, v]) => `${k}=${v}`),
      User: `${SANDBOX_UID}:${SANDBOX_UID}`,
      Hostname: SANDBOX_HOSTNAME,
      WorkingDir: '/repo',
      NetworkDisabled: true,
      Labels: opts.labels,
      HostConfig: hostConfig([`${libDir()}:/worldline/lib:ro`, ...py.binds], limits),
    });
    // The hubs said offline for every command, by exec or by the server alike.
    const env = { ...OFFLINE_VARS, ...opts.env };
    const session = new SandboxSession(container, py, env);
    try {
      await container.start();
      const script = opts.setup ? `${PREPARE_REPO} || exit $?\n${opts.setup.script}` : PREPARE_REPO;
      // The setup is the server's first command, not an exec of its own: an exec costs the engine
      // about 60 ms of CPU here, on machines whose cores the task slots already fill.
      if (opts.toolServer)
        session.server = await ToolServer.start(container, {
          cmd: [...py.argv, '/worldline/lib/tool_server.py'],
          env: session.ours,
          commands: suiteEnvChange(py.imageEnv, env, Object.keys(session.ours)),
        });
      const prepared = await session.exec(['sh', '-c', script, 'sh', ...(opts.setup?.args ?? [])], 300, 4096);
      if (prepared.exitCode !== 0) throw new Error(`cannot prepare the session's /repo: ${prepared.output.slice(-500)}`);
    } catch (e) {
      await session.close();
      throw e;
    }
    return session;
  }

  /**
   * Writes a file into the container. Not through the archive API: the root file system is
   * read-only and the engine cannot see into the container's tmpfs mounts; so through exec, in
   * base64 chunks that each fit one argument.
   */
  async writeFile(path: string, content: string): Promise<void> {
    const b64 = Buffer.from(content).toString('base64');
    const chunk = 96 * 1024; // a multiple of 4: each chunk decodes on its own
    for (let at = 0; at === 0 || at < b64.length; at += chunk) {
      const res = await this.exec(['sh', '-c', `printf %s "$1" | base64 -d ${at ? '>>' : '>'} "$2"`, 'sh', b64.slice(at, at + chunk), path], 60, 4096);
      if (res.exitCode !== 0) throw new Error(`cannot write ${path} in the container: ${res.output}`);
    }
  }

  /** Whether commands still go through the tool server. */
  get served(): boolean {
    return this.server?.alive ?? false;
  }

  /**
   * Runs a command in /repo under `timeout`, keeping the first `cap` characters of its output. A
   * command of OUR_PYTHON's runs on our interpreter with our environment, and no `timeout` of the
   * image's: the server (or the tool itself) ends it.
   */
  async exec(cmd: string[], timeoutS: number, cap: number): Promise<{ output: string; exitCode: number | null }> {
    const own = cmd[0] === OUR_PYTHON;
    const full = expandOurPython(cmd, this.py.argv);
    if (!this.served) return this.execOnce(full, timeoutS, cap, own);
    // Bytes enough for `cap` characters however they decode (a character is at most 3 bytes of UTF-8 per UTF-16 unit).
    const answer = await this.server!.run(full, timeoutS, 3 * cap + 3, own);
    // Gone mid-command (the agent's own command killed or stopped it): what the command did is unknown.
    if (!answer) return { output: '[worldline: the tool server stopped during this command; its output is lost]', exitCode: null };
    return { output: capOutput(answer.kept.toString('utf8'), answer.dropped, cap), exitCode: answer.exitCode };
  }

  /** One exec of its own: three round trips to the engine. */
  private async execOnce(cmd: string[], timeoutS: number, cap: number, own: boolean): Promise<{ output: string; exitCode: number | null }> {
    const ex = await this.container.exec({
      Cmd: own ? cmd : ['timeout', '-k', '5', String(timeoutS), ...cmd],
      Env: Object.entries(own ? this.ours : this.env).map(([k, v]) => `${k}=${v}`),
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
    const info = await ex.inspect();
    return { output: capOutput(output, dropped, cap), exitCode: info.ExitCode ?? null };
  }

  async close(): Promise<void> {
    this.server?.stop();
    await this.container.remove({ force: true, v: true }).catch(() => undefined);
  }
}

/** The checkout at /repo and our Python at /worldline/lib, for a build's setup (runAndCommit). */
async function putCheckoutAndLib(container: Docker.Container, checkout: string): Promise<void> {
  // The tar starts only now: a stream made earlier loses a small checkout (tar exits before the engine reads).
  await container.putArchive(tarStream(['-C', checkout, '--transform', 's,^\\./,repo/,;s,^\\.$,repo,', '.']), { path: '/' });
  // Our Python where runs mount it, for the image's bytecode (pipeline/sandbox/bytecode.ts): sources
  // only, no tests; the build script removes it once compiled, and runs mount the live tree over it.
  const lib = ['--exclude=__pycache__', '--exclude=tests', '--exclude=mutate_tests', '--exclude=*.[ch]', '--exclude=*.so'];
  await container.putArchive(tarStream(['-C', tracersDir, ...lib, '--transform', 's,^\\.,worldline/lib,', '.']), { path: '/' });
}

/**
 * The repository-controlled part of a build (the manifest's `setup` steps, installing the
 * repository itself): run as root in a container of `image` with no network, the run's memory,
 * pids and CPU limits, no capabilities but those a root install needs on its own files, and no
 * engine log; committed as `tag` when it exits 0. The host folder `checkout` arrives at /repo, and a
 * copy of tracers/' sources at /worldline/lib.
 */
export async function runAndCommit(opts: {
  image: string;
  /** Absent for an image of no repository's (a heavy stack, stack_images.ts): then neither the checkout nor our Python arrives. */
  checkout?: string;
  script: string;
  limits: SandboxLimits;
  timeoutMs: number;
  tag: string;
  changes: string[];
  onOutput: (chunk: Buffer) => void;
  /** Host folders the script reads (the index's locked files): mounted read-only, so never part of the committed image. */
  readOnly?: { host: string; at: string }[];
}): Promise<{ imageId: string | null; exitCode: number | null; timedOut: boolean; oomKilled: boolean }> {
  const limits = toRunLimits(opts.limits);
  const container = await newContainer({
    Image: opts.image,
    Cmd: ['sh', '-c', opts.script],
    WorkingDir: '/repo',
    User: '0:0',
    Hostname: SANDBOX_HOSTNAME,
    NetworkDisabled: true,
    Labels: { 'worldline.role': 'build' },
    HostConfig: {
      NetworkMode: 'none',
      Binds: (opts.readOnly ?? []).map((m) => `${m.host}:${m.at}:ro`),
      Memory: limits.memoryBytes,
      MemorySwap: limits.memoryBytes,
      PidsLimit: limits.pids,
      NanoCpus: Math.round(limits.cpus * 1e9),
      CapDrop: ['ALL'],
      CapAdd: ['CHOWN', 'DAC_OVERRIDE', 'FOWNER', 'FSETID', 'SETUID', 'SETGID'],
      SecurityOpt: ['no-new-privileges'],
      Ulimits: [{ Name: 'core', Soft: 0, Hard: 0 }],
      Init: true,
      LogConfig: { Type: 'none', Config: {} },
    },
  });
  try {
    if (opts.checkout) await putCheckoutAndLib(container, opts.checkout);
    const { exitCode, timedOut, oomKilled } = await startAndWait(container, opts.timeoutMs, opts.onOutput);
    if (exitCode !== 0 || timedOut) return { imageId: null, exitCode, timedOut, oomKilled };
    const [repo, tag] = opts.tag.split(':');
    // The build container's owner and job labels must not pass to every container of the image.
    const changes = [...opts.changes, 'LABEL worldline.owner=', 'LABEL worldline.role=', `LABEL ${JOB_LABEL}=`, `LABEL ${OUT_LABEL}=`];
    // With no config of its own the engine commits the container's, NetworkDisabled and all: a
    // heavy stack committed so left every `docker build` FROM it without DNS (apt-get could not
    // reach the mirror). The engine merges the rest (user, env, cmd, workdir, labels) as before.
    const committed = (await container.commit({
      _query: { container: container.id, repo, tag, changes },
      _body: { NetworkDisabled: false },
    } as object)) as { Id: string };
    return { imageId: committed.Id, exitCode, timedOut, oomKilled };
  } finally {
    await container.remove({ force: true, v: true }).catch(() => undefined);
  }
}
