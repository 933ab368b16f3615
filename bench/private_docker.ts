/**
 * A private Docker Engine for the fault harness (bench/chaos.ts, test/chaos.test.ts): a second
 * dockerd with its own data root, exec root, socket, pid file and cgroup parent, no bridge and no
 * iptables rules, over a containerd of its own run beside it (as a service manager runs both: a
 * crashed dockerd leaves containerd and the containers running, and the next dockerd finds them),
 * so restarting or killing it touches nothing of the machine's engine or of other people's
 * containers. Worldline is pointed at it with DOCKER_SOCKET. Images come from the machine's engine
 * (`docker save`, `docker load`: the same ids).
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdirSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { removeTree } from '../core/mounts.js';

/** Whether this machine can run a second engine: root, and dockerd on PATH. */
export function privateDockerPossible(): boolean {
  try {
    execFileSync('sh', ['-c', 'command -v dockerd'], { stdio: 'ignore' });
    return process.getuid?.() === 0;
  } catch {
    return false;
  }
}

export class PrivateDocker {
  private child: ChildProcess | null = null;
  private containerd: ChildProcess | null = null;
  private readonly execRoot: string;
  readonly socket: string;

  private constructor(
    readonly dir: string,
    name: string,
  ) {
    // Unix socket paths are short (108 bytes), and containerd's sits under the exec root.
    this.execRoot = `/run/${name}`;
    this.socket = `/run/${name}.sock`;
  }

  /** Starts an engine whose state lives under `dir` (`name`: a short, unique name for its run-time paths). */
  static async start(dir: string, name = `worldline-chaos-${process.pid}`): Promise<PrivateDocker> {
    const d = new PrivateDocker(dir, name);
    // An engine starts empty: a harness killed before its stop left its data (overlay mounts,
    // containers) here, which a rerun in the same folder would otherwise count as its leftovers.
    removeTree(dir);
    mkdirSync(dir, { recursive: true });
    await d.startContainerd();
    await d.up();
    return d;
  }

  private get containerdSocket(): string {
    return join(this.execRoot, 'containerd', 'containerd.sock');
  }

  /** Its own containerd: own root, state, sockets and no CRI plugin (the system's config is not read). */
  private async startContainerd(): Promise<void> {
    const root = join(this.dir, 'containerd');
    mkdirSync(root, { recursive: true });
    mkdirSync(join(this.execRoot, 'containerd'), { recursive: true });
    const config = join(root, 'config.toml');
    writeFileSync(
      config,
      [
        'version = 2',
        `root = ${JSON.stringify(root)}`,
        `state = ${JSON.stringify(join(this.execRoot, 'containerd', 'state'))}`,
        'disabled_plugins = ["io.containerd.grpc.v1.cri"]',
        '[grpc]',
        `  address = ${JSON.stringify(this.containerdSocket)}`,
        '[plugins."io.containerd.internal.v1.opt"]',
        `  path = ${JSON.stringify(join(root, 'opt'))}`,
        '',
      ].join('\n'),
    );
    const log = openSync(join(this.dir, 'containerd.log'), 'a');
    this.containerd = spawn('containerd', ['--config', config], { stdio: ['ignore', log, log] });
    for (let i = 0; i < 120 && !existsSync(this.containerdSocket); i++) {
      if (this.containerd.exitCode !== null) break;
      await sleep(250);
    }
    if (!existsSync(this.containerdSocket))
      throw new Error(`the private containerd did not start: ${readFileSync(join(this.dir, 'containerd.log'), 'utf8').slice(-2000)}`);
  }

  /** The environment that points Worldline at this engine. */
  get env(): Record<string, string> {
    return { DOCKER_SOCKET: this.socket };
  }

  /** The docker CLI against this engine. */
  cli(args: string[]): string {
    return execFileSync('docker', ['-H', `unix://${this.socket}`, ...args], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], maxBuffer: 1 << 26 });
  }

  private async up(): Promise<void> {
    const log = openSync(join(this.dir, 'dockerd.log'), 'a');
    const args = [
      '--data-root',
      join(this.dir, 'data'),
      '--exec-root',
      this.execRoot,
      '--host',
      `unix://${this.socket}`,
      '--pidfile',
      `${this.execRoot}.pid`,
      '--bridge=none',
      '--iptables=false',
      '--ip-masq=false',
      '--cgroup-parent',
      `${this.execRoot.slice('/run/'.length)}`,
      '--containerd',
      this.containerdSocket,
    ];
    this.child = spawn('dockerd', args, { stdio: ['ignore', log, log], detached: false });
    for (let i = 0; i < 240; i++) {
      if (this.child.exitCode !== null) break;
      try {
        this.cli(['version', '--format', '{{.Server.Version}}']);
        return;
      } catch {
        await sleep(250);
      }
    }
    throw new Error(`the private dockerd did not answer on ${this.socket}: ${readFileSync(join(this.dir, 'dockerd.log'), 'utf8').slice(-2000)}`);
  }

  /** Copies images (by reference) from the machine's engine, those it has already skipped. */
  loadImages(refs: string[]): void {
    const missing = refs.filter((r) => {
      try {
        this.cli(['image', 'inspect', '--format', '{{.Id}}', r]);
        return false;
      } catch {
        return true;
      }
    });
    if (!missing.length) return;
    const tar = join(this.dir, 'images.tar');
    execFileSync('docker', ['save', '-o', tar, ...missing]);
    this.cli(['load', '-q', '-i', tar]);
    rmSync(tar, { force: true });
  }

  /** Ids of the containers, running or not, this engine has; with `label`, only those carrying it. */
  containers(label?: string): string[] {
    return this.cli(['ps', '-aq', ...(label ? ['--filter', `label=${label}`] : [])])
      .split('\n')
      .filter(Boolean);
  }

  /**
   * Restarts the engine: `graceful` as a service manager does (SIGTERM: it stops its containers,
   * then exits), else as a crash (SIGKILL: containerd keeps the containers until the engine comes
   * back and kills them); down for `downMs`.
   */
  async restart(graceful: boolean, downMs = 1000): Promise<void> {
    await stopped(this.child, graceful ? 'SIGTERM' : 'SIGKILL');
    this.child = null;
    await sleep(downMs);
    await this.up();
  }

  /** Stops the engine and its containerd, and removes their state. */
  async stop(): Promise<void> {
    await stopped(this.child, 'SIGTERM');
    this.child = null;
    await stopped(this.containerd, 'SIGTERM');
    this.containerd = null;
    removeTree(this.execRoot);
    rmSync(this.socket, { force: true });
    // Its overlay mounts go with a clean stop; whatever a crash left is detached first.
    removeTree(join(this.dir, 'data'));
    removeTree(join(this.dir, 'containerd'));
  }
}

/** Sends `signal` to a process of ours and waits for its exit. */
async function stopped(child: ChildProcess | null, signal: NodeJS.Signals): Promise<void> {
  if (!child || child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((r) => child.once('exit', r));
  child.kill(signal);
  await exited;
}
