/**
 * A real redis-server (Debian's) for the queue tests and bench/queue.ts: on loopback, a free port, its own folder,
 * append-only persistence on so a restart keeps the queue, as a production Redis for BullMQ should.
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { createServer } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';

export function redisServerPath(): string {
  try {
    return execFileSync('sh', ['-c', 'command -v redis-server'], { encoding: 'utf8' }).trim();
  } catch {
    throw new Error('the queue tests need redis-server on PATH (Debian: apt-get install redis-server; .ci/run installs it)');
  }
}

/** A port nothing listens on now, on loopback (the servers the tests start take it next). */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
  });
}

export class RedisServer {
  private child: ChildProcess | null = null;
  private constructor(
    readonly dir: string,
    readonly port: number,
  ) {}

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  static async start(dir: string): Promise<RedisServer> {
    const r = new RedisServer(dir, await freePort());
    await r.up();
    return r;
  }

  private async up(): Promise<void> {
    const args = ['--port', String(this.port), '--bind', '127.0.0.1', '--dir', this.dir, '--appendonly', 'yes', '--save', '', '--protected-mode', 'yes'];
    this.child = spawn(redisServerPath(), args, { stdio: 'ignore' });
    for (let i = 0; i < 100; i++) {
      try {
        execFileSync('redis-cli', ['-p', String(this.port), 'ping'], { stdio: 'pipe' });
        return;
      } catch {
        await sleep(100);
      }
    }
    throw new Error(`redis-server on port ${this.port} did not answer`);
  }

  /** Bytes Redis holds for data (INFO memory's used_memory). */
  usedMemory(): number {
    const info = execFileSync('redis-cli', ['-p', String(this.port), 'info', 'memory'], { encoding: 'utf8' });
    return Number(/^used_memory:(\d+)/m.exec(info)?.[1]);
  }

  /** SIGTERM (Redis flushes its append-only file and exits), then the same port and folder again. */
  async restart(downMs = 2000): Promise<void> {
    await this.stop();
    await sleep(downMs);
    await this.up();
  }

  async stop(): Promise<void> {
    const child = this.child;
    if (!child || child.exitCode !== null) return;
    const exited = new Promise((r) => child.once('exit', r));
    child.kill('SIGTERM');
    await exited;
    this.child = null;
  }
}
