/**
 * Every container runs without privileges: no capabilities (so no device nodes, no chown of
 * others' files) and no way to regain them through setuid binaries. Checked from inside a real
 * sandboxed container, and on the host's side of its work folder.
 */
import { execFileSync, spawn } from 'node:child_process';
import { lstatSync, readdirSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { describe, expect, inject, it } from 'vitest';
import { packageRoot } from '../core/package.js';
import { OWNER_LABEL, removeOrphanContainers } from '../pipeline/sandbox/engine.js';
import { readResult } from '../pipeline/sandbox/results.js';
import { runSandboxed, SandboxSession } from '../pipeline/sandbox/sandbox.js';
import { tempDir } from './helpers.js';

describe('the sandbox', () => {
  it('drops every capability and sets no-new-privileges, so a test cannot make device nodes or setuid files on the host', async () => {
    const work = tempDir('sandbox');
    const script = [
      'grep -E "^(CapEff|CapBnd|NoNewPrivs):" /proc/self/status > /worldline/out/status',
      'mknod /worldline/out/null c 1 3 2>/dev/null && echo made > /worldline/out/mknod || echo denied > /worldline/out/mknod',
      'cp /bin/sh /worldline/out/rootshell && chown 1234 /worldline/out/rootshell 2>/dev/null && echo made > /worldline/out/chown || echo denied > /worldline/out/chown',
      'rm -f /worldline/out/rootshell',
    ].join('\n');
    const res = await runSandboxed({
      image: inject('base311'),
      cmd: ['sh', '-c', script],
      work,
      vars: {},
      srcLayout: false,
      limits: { memoryMb: 256, pids: 64, cpus: 1 },
      timeoutMs: 60_000,
      labels: { 'worldline.stage': 'test-sandbox' },
    });
    expect(res.exitCode, res.output).toBe(0);
    const status = readResult(work, 'status') as string;
    expect(status).toMatch(/^CapEff:\s+0000000000000000$/m);
    expect(status).toMatch(/^CapBnd:\s+0000000000000000$/m);
    expect(status).toMatch(/^NoNewPrivs:\s+1$/m);
    expect(readResult(work, 'mknod')).toBe('denied\n');
    expect(readResult(work, 'chown')).toBe('denied\n');
    // Nothing but plain files came back to the host.
    for (const name of readdirSync(work)) expect(lstatSync(join(work, name)).isFile(), name).toBe(true);
  });
  it('says out of memory only when the engine says so: a memory hog and a plain SIGKILL both exit 137', async () => {
    const run = (script: string) =>
      runSandboxed({
        image: inject('base311'),
        cmd: ['sh', '-c', script],
        work: tempDir('oom'),
        vars: {},
        srcLayout: false,
        limits: { memoryMb: 64, pids: 64, cpus: 1 },
        timeoutMs: 60_000,
        labels: { 'worldline.stage': 'test-sandbox' },
      });
    const hog = await run("python3 -c 'x = bytearray(512 << 20); print(len(x))'");
    expect(hog.exitCode, hog.output).toBe(137);
    expect(hog.oomKilled).toBe(true);
    // PID 1 ignores signals, so a child is killed, and the shell passes its status on (as run.sh does for pytest).
    const killed = await run(`python3 -c 'import os, signal; os.kill(os.getpid(), signal.SIGKILL)'; exit $?`);
    expect(killed.exitCode).toBe(137);
    expect(killed.oomKilled).toBe(false);
  });
  it('a run killed with SIGKILL leaves its container, and the next run removes it while a live run keeps its own', async () => {
    const owned = (owner: string) => execFileSync('docker', ['ps', '-aq', '--filter', `label=worldline.owner=${owner}`], { encoding: 'utf8' }).trim();
    const sessionModule = join(packageRoot, 'dist', 'pipeline', 'sandbox', 'sandbox.js');
    const start = `const { SandboxSession } = await import(${JSON.stringify(sessionModule)});
      await SandboxSession.start({ image: ${JSON.stringify(inject('base311'))}, env: {}, limits: { memoryMb: 64, pids: 16, cpus: 1 }, labels: {} });
      console.log('started'); setInterval(() => {}, 1000);`;
    const child = spawn(process.execPath, ['--input-type=module', '-e', start], { stdio: ['ignore', 'pipe', 'inherit'] });
    await new Promise<void>((resolve) => child.stdout.on('data', (d) => String(d).includes('started') && resolve()));
    child.kill('SIGKILL');
    await new Promise((resolve) => child.on('exit', resolve));
    const orphanOwner = `${hostname()}:${child.pid}`;
    expect(owned(orphanOwner)).not.toBe('');
    const mine = await SandboxSession.start({ image: inject('base311'), env: {}, limits: { memoryMb: 64, pids: 16, cpus: 1 }, labels: {} });
    try {
      expect(await removeOrphanContainers()).toBeGreaterThanOrEqual(1);
      expect(owned(orphanOwner)).toBe('');
      expect(owned(OWNER_LABEL['worldline.owner'])).not.toBe('');
    } finally {
      await mine.close();
    }
  });
});
