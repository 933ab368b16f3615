/**
 * Every container runs without privileges: no capabilities (so no device nodes, no chown of
 * others' files) and no way to regain them through setuid binaries. Checked from inside a real
 * sandboxed container, and on the host's side of its work folder.
 */
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, lstatSync, readdirSync, writeFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { describe, expect, inject, it } from 'vitest';
import { packageRoot } from '../core/package.js';
import { OWNER_LABEL, removeOrphanContainers } from '../pipeline/sandbox/engine.js';
import { foldReport } from '../pipeline/sandbox/pytest_report.js';
import { readResult } from '../pipeline/sandbox/results.js';
import { holdSandboxed, runSandboxed, SandboxSession } from '../pipeline/sandbox/sandbox.js';
import {
  pytestCommand,
  readRunFiles,
  readSteps,
  runnerCommand,
  runnerProblem,
  type Step,
  stepRun,
  stepsRunner,
  writeReportKey,
} from '../pipeline/sandbox/suite_run.js';
import { tempDir } from './helpers.js';

/** A command in a sandboxed container of the 3.11 base image. */
const inBase = (cmd: string[], work: string, memoryMb: number) =>
  runSandboxed({
    image: inject('base311'),
    cmd,
    work,
    vars: {},
    srcLayout: false,
    limits: { memoryMb, pids: 64, cpus: 1 },
    timeoutMs: 120_000,
    labels: { 'worldline.stage': 'test-sandbox' },
  });

describe('the sandbox', () => {
  it('drops every capability and sets no-new-privileges, so a test cannot make device nodes or setuid files on the host', async () => {
    const work = tempDir('sandbox');
    const script = [
      'grep -E "^(CapEff|CapBnd|NoNewPrivs):" /proc/self/status > /worldline/out/status',
      'mknod /worldline/out/null c 1 3 2>/dev/null && echo made > /worldline/out/mknod || echo denied > /worldline/out/mknod',
      'cp /bin/sh /worldline/out/rootshell && chown 1234 /worldline/out/rootshell 2>/dev/null && echo made > /worldline/out/chown || echo denied > /worldline/out/chown',
      'rm -f /worldline/out/rootshell',
    ].join('\n');
    const res = await inBase(['sh', '-c', script], work, 256);
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
  it('runs as a non-root user on a read-only root, with size-limited nosuid scratch, file-size and open-file limits and an init', async () => {
    const work = tempDir('hardened');
    const script = [
      'id -u > /worldline/out/uid',
      'touch /etc/x 2>/dev/null && echo writable > /worldline/out/root || echo read-only > /worldline/out/root',
      'grep -E " /(tmp|repo) " /proc/mounts > /worldline/out/mounts',
      'ulimit -f > /worldline/out/fsize; ulimit -n > /worldline/out/nofile',
      'cat /proc/1/comm > /worldline/out/init',
      'echo "$HOME" > /worldline/out/home',
      // A file past RLIMIT_FSIZE stops at the limit (dd is killed by SIGXFSZ).
      `dd if=/dev/zero of=/tmp/big bs=1M count=${(1 << 30) / (1 << 20) + 8} 2>/dev/null; ls -l /tmp/big | awk '{print $5}' > /worldline/out/big`,
    ].join('\n');
    const res = await inBase(['sh', '-c', script], work, 2048);
    expect(res.exitCode, res.output).toBe(0);
    expect(readResult(work, 'uid')).toBe('10001\n');
    expect(readResult(work, 'root')).toBe('read-only\n');
    const mounts = readResult(work, 'mounts') as string;
    expect(mounts).toMatch(/^tmpfs \/tmp tmpfs rw,nosuid,nodev,.*size=1048576k/m);
    expect(mounts).toMatch(/^tmpfs \/repo tmpfs rw,nosuid,nodev,.*size=2097152k/m);
    expect(readResult(work, 'fsize')).toBe(`${(1 << 30) / 512}\n`);
    expect(readResult(work, 'nofile')).toBe('4096\n');
    expect(readResult(work, 'init')).toBe('docker-init\n');
    expect(readResult(work, 'home')).toBe('/tmp\n');
    // The tmpfs (1 GiB) fills before the file-size limit would: either way no file passes 1 GiB.
    expect(Number(readResult(work, 'big'))).toBeLessThanOrEqual(1 << 30);
  });
  it('tells model hubs every run is offline (they fail at once instead of retrying), unless the unit sets otherwise', async () => {
    const work = tempDir('offline');
    const res = await runSandboxed({
      image: inject('base311'),
      cmd: ['sh', '-c', 'echo "$HF_HUB_OFFLINE $HF_DATASETS_OFFLINE $TRANSFORMERS_OFFLINE" > /worldline/out/hub'],
      work,
      vars: { TRANSFORMERS_OFFLINE: '0' },
      srcLayout: false,
      limits: { memoryMb: 256, pids: 64, cpus: 1 },
      timeoutMs: 120_000,
      labels: { 'worldline.stage': 'test-sandbox' },
    });
    expect(res.exitCode, res.output).toBe(0);
    expect(readResult(work, 'hub')).toBe('1 1 0\n');
  });

  it("names no folder of the host's checkout in its mount table, and gives every run an empty /etc/ld.so.preload", async () => {
    const work = tempDir('mountinfo');
    const res = await inBase(
      ['sh', '-c', 'cat /proc/self/mountinfo > /worldline/out/mountinfo; wc -c < /etc/ld.so.preload > /worldline/out/preload'],
      work,
      256,
    );
    expect(res.exitCode, res.output).toBe(0);
    const mounts = readResult(work, 'mountinfo') as string;
    expect(mounts).toMatch(/ \/worldline\/lib ro,/);
    // Our Python came from the checkout's tracers/ folder, and mountinfo gave its host path away.
    expect(mounts).not.toContain(packageRoot);
    expect(readResult(work, 'preload')).toBe('0\n');
  });
  it('keeps the report key from the tests: gone from the work folder, on no descriptor, environment or memory of any process they can read, pytest included', async () => {
    const work = tempDir('key');
    writeFileSync(
      join(work, 'test_steal.py'),
      [
        'import glob, os, re',
        'def test_steal():',
        '    found = []',
        '    paths = ["/worldline/out/key"] + glob.glob("/proc/[0-9]*/fd/*") + glob.glob("/proc/[0-9]*/environ") + glob.glob("/proc/[0-9]*/mem")',
        '    for path in paths:',
        '        try:',
        // Non-blocking: an open pipe end (our own stdout) must not hang the read.
        '            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)',
        '            try:',
        '                found.append(b"" if path.endswith("/mem") else os.read(fd, 1 << 16))',
        '            finally:',
        '                os.close(fd)',
        '        except OSError:',
        '            pass',
        // Every process's writable memory, pytest's own included, scanned for what a key looks like.
        '    for maps in glob.glob("/proc/[0-9]*/maps"):',
        '        pid = maps.split("/")[2]',
        '        try:',
        '            with open(maps) as m, open("/proc/%s/mem" % pid, "rb", 0) as mem:',
        '                for line in m:',
        '                    span, perms = line.split()[:2]',
        '                    if not perms.startswith("rw"):',
        '                        continue',
        '                    lo, hi = (int(x, 16) for x in span.split("-"))',
        '                    mem.seek(lo)',
        '                    found.extend(re.findall(rb"[0-9a-f]{64}", mem.read(min(hi - lo, 64 << 20))))',
        '        except (OSError, ValueError, OverflowError):',
        '            pass',
        '    os.write(1, b"STOLEN:" + b"|".join(found) + b"\\n")',
        '',
      ].join('\n'),
    );
    const key = writeReportKey(work);
    const res = await inBase(runnerCommand(1, 60, 0, [...pytestCommand(['-s'], 0, false), '/worldline/out/test_steal.py']), work, 256);
    const run = readRunFiles(work, 1);
    const output = readResult(work, 'output-1.log') as string;
    expect(output, res.output).toContain('STOLEN:');
    expect(output).not.toContain(key);
    expect(readResult(work, 'key')).toBeNull();
    // The report is signed with the key: by the runner, the one process the tests cannot read.
    const folded = foldReport(run.report ?? '', run.exitCode, false, { key, file: 'report-1.jsonl' });
    expect(folded.problem).toBeNull();
    expect(folded.tests.map((t) => t.outcome)).toEqual(['passed']);
  });
  it('kills a test that ignores SIGALRM at the per-test limit from outside, whatever it forges on or closes of its descriptors', async () => {
    const work = tempDir('test-limit');
    writeFileSync(
      join(work, 'test_spin.py'),
      [
        'import os, signal',
        '',
        'def test_ok():',
        '    pass',
        '',
        'def test_spin():',
        '    signal.signal(signal.SIGALRM, signal.SIG_IGN)',
        '    signal.alarm(1)',
        // "This test ended" (and a fresh start, to move its deadline) on every descriptor, the
        // report pipe included, then every descriptor closed.
        '    forged = b\'{"progress": "end", "nodeid": "test_spin.py::test_spin"}\\n{"progress": "start", "nodeid": "test_spin.py::test_spin"}\\n\'',
        '    for fd in range(3, 256):',
        '        try:',
        '            os.write(fd, forged)',
        '        except OSError:',
        '            pass',
        '    os.closerange(3, 256)',
        '    while True:',
        '        pass',
        '',
        'def test_after():',
        '    pass',
        '',
      ].join('\n'),
    );
    const key = writeReportKey(work);
    // A suite timeout far past the per-test limit: only the runner's watchdog can end this run in time.
    const res = await inBase(runnerCommand(1, 600, 3, [...pytestCommand([], 1, false), '/worldline/out/test_spin.py']), work, 256);
    const run = readRunFiles(work, 1);
    expect(res.timedOut, res.output).toBe(false);
    expect(run.exitCode).toBe(124);
    expect(run.testTimedOut).toBe('test_spin.py::test_spin');
    expect(runnerProblem(run, 3)).toBe('test timed out: test_spin.py::test_spin (per-test limit: 3 s, killed by the runner)');
    // The tests before it reported (signed); the one after never ran.
    const folded = foldReport(run.report ?? '', null, true, { key, file: 'report-1.jsonl' });
    expect(Object.fromEntries(folded.tests.map((t) => [t.nodeid, t.outcome]))).toMatchObject({
      'test_spin.py::test_ok': 'passed',
      'test_spin.py::test_after': 'missing',
    });
  });
  it("refuses a step list a test rewrote: every step's outcome is signed by the runner", async () => {
    const work = tempDir('steps');
    // The test rewrites what the runner wrote so far: the index listing it would have us check.
    writeFileSync(
      join(work, 'test_forge.py'),
      [
        'def test_forge():',
        '    with open("/worldline/out/steps.jsonl", "w") as f:',
        '        f.write(\'{"name": "index", "exit": 0, "output": "forged", "seq": 0, "started": 0, "ended": 0}\\n\')',
        '',
      ].join('\n'),
    );
    const steps: Step[] = [
      { name: 'index', sh: 'echo honest' },
      { name: 'before', run: [...pytestCommand([], 0, false), '/worldline/out/test_forge.py'], timeoutS: 60, testLimitS: 30 },
      { name: 'fix', sh: 'exit 3' },
      { name: 'after', sh: 'echo never' },
    ];
    const { cmd, key } = stepsRunner(work, steps, 1 << 20);
    const res = await inBase(cmd, work, 256);
    expect(() => readSteps(work, key), res.output).toThrow(/^line 1 of the step results is not signed by the runner$/);
    // The same steps, honest: outcomes signed in order, the list ended at the failing script.
    const honest = tempDir('steps-honest');
    writeFileSync(join(honest, 'test_forge.py'), 'def test_ok():\n    pass\n');
    const again = stepsRunner(honest, steps, 1 << 20);
    await inBase(again.cmd, honest, 256);
    const outcomes = readSteps(honest, again.key);
    expect([...outcomes.keys()]).toEqual(['index', 'before', 'fix']);
    expect(outcomes.get('index')).toMatchObject({ exit: 0, output: 'honest\n' });
    expect(outcomes.get('fix')?.exit).toBe(3);
    expect(stepRun(honest, outcomes.get('before'), again.key, 30)).toMatchObject({
      problem: null,
      tests: [{ nodeid: 'test_forge.py::test_ok', outcome: 'passed' }],
    });
  });
  it('says out of memory only when the engine says so: a memory hog and a plain SIGKILL both exit 137', async () => {
    const run = (script: string) => inBase(['sh', '-c', script], tempDir('oom'), 64);
    const hog = await run("python3 -c 'x = bytearray(512 << 20); print(len(x))'");
    expect(hog.exitCode, hog.output).toBe(137);
    expect(hog.oomKilled).toBe(true);
    // PID 1 ignores signals, so a child is killed, and the shell passes its status on (as run.sh does for pytest).
    const killed = await run(`python3 -c 'import os, signal; os.kill(os.getpid(), signal.SIGKILL)'; exit $?`);
    expect(killed.exitCode).toBe(137);
    expect(killed.oomKilled).toBe(false);
  });
  it('a held run starts its container ahead and runs its command only when let go, seeing inputs written after the hold; cancelled, it is gone', async () => {
    const containers = (stage: string, all = false) =>
      execFileSync('docker', ['ps', '-q', ...(all ? ['-a'] : []), '--filter', `label=worldline.stage=${stage}`], { encoding: 'utf8' }).trim();
    const spec = (work: string, stage: string) => ({
      image: inject('base311'),
      // When it started (ns since the epoch), what it was given, and what its standard input holds.
      cmd: ['sh', '-c', 'date +%s%N > /worldline/out/started; cat /worldline/out/input > /worldline/out/seen; wc -c < /dev/stdin; exit 3'],
      work,
      vars: {},
      srcLayout: false,
      limits: { memoryMb: 256, pids: 64, cpus: 1 },
      labels: { 'worldline.stage': stage },
    });
    const work = tempDir('held');
    const held = await holdSandboxed(spec(work, 'test-held'));
    expect(containers('test-held')).not.toBe('');
    writeFileSync(join(work, 'input'), 'written after the hold\n');
    const letGo = BigInt(Date.now()) * 1_000_000n;
    const res = await held.go(60_000);
    expect(res, res.output).toMatchObject({ exitCode: 3, timedOut: false, oomKilled: false, output: '0\n' });
    expect(readResult(work, 'seen')).toBe('written after the hold\n');
    expect(BigInt((readResult(work, 'started') as string).trim())).toBeGreaterThanOrEqual(letGo);
    expect(containers('test-held', true)).toBe('');

    const unused = tempDir('held-cancelled');
    const cancelled = await holdSandboxed(spec(unused, 'test-held-cancelled'));
    expect(containers('test-held-cancelled')).not.toBe('');
    await cancelled.cancel();
    expect(containers('test-held-cancelled', true)).toBe('');
    expect(existsSync(join(unused, 'started'))).toBe(false);
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
