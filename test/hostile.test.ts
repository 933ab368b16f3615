/**
 * The hostile suite (examples/hostile/) through `worldline run`, clone to trace, on real Docker:
 * each attack is contained with its recorded reason, the benign unit still finishes, and the host
 * is unchanged (no connection to its loopback, no host file read, no setuid or device file, the
 * output folder small, no work folder left). Plus the build network on its own: package installs
 * reach the mirror but not the host's loopback.
 */
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { cpSync, lstatSync, readdirSync, readFileSync, type Stats, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { mountsUnder } from '../core/mounts.js';
import { packageRoot } from '../core/package.js';
import type { ForageRecord, TraceStageRecord } from '../pipeline/runtime/records.js';
import { buildImage, removeImage, tarStream } from '../pipeline/sandbox/engine.js';
import { cli, tempDir } from './helpers.js';

interface RunJson {
  units: { repo: string; status: string; stage: string | null; reason: string | null; ran: string[] }[];
}

/** Every path under `dir` (no link followed) with its lstat. */
function walk(dir: string): { path: string; st: Stats }[] {
  const found: { path: string; st: Stats }[] = [];
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    const st = lstatSync(path);
    found.push({ path, st });
    if (st.isDirectory()) found.push(...walk(path));
  }
  return found;
}

/** A listener on the host's loopback that counts who reached it. */
async function loopbackListener(): Promise<{ server: Server; port: number; hits: () => number }> {
  let hits = 0;
  const server = createServer((socket) => {
    hits += 1;
    socket.end('HTTP/1.0 200 OK\r\n\r\nreached\n');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, port: (server.address() as { port: number }).port, hits: () => hits };
}

describe('the hostile suite, through worldline run', () => {
  let run: RunJson;
  let out: string;
  let listener: Awaited<ReturnType<typeof loopbackListener>>;
  const secret = `host-secret-${randomBytes(12).toString('hex')}`;
  let peakRssKb = 0;
  /** The run's arguments (without --json): run again, every unit is done. */
  let runArgs: string[] = [];
  const unit = (name: string) => run.units.find((u) => u.repo === name)!;

  beforeAll(async () => {
    listener = await loopbackListener();
    const dir = tempDir('hostile-suite');
    out = join(dir, 'out');
    const repos = join(dir, 'repos');
    cpSync(join(packageRoot, 'examples', 'hostile', 'repos'), repos, { recursive: true });
    const secretFile = join(dir, 'secret.txt');
    writeFileSync(secretFile, `${secret}\n`);
    // Another repository on the host, holding the secret, that git-file's .git points at.
    const elsewhere = join(dir, 'elsewhere');
    execFileSync('sh', [
      '-c',
      `mkdir -p ${elsewhere} && cd ${elsewhere} && git init -q && cp ${secretFile} . && git add -A && git -c user.name=x -c user.email=x@x commit -qm secret`,
    ]);
    writeFileSync(join(repos, 'git-file', '.git'), `gitdir: ${elsewhere}/.git\n`);
    const lines = readFileSync(join(packageRoot, 'examples', 'hostile', 'manifest.jsonl'), 'utf8')
      .trim()
      .split('\n')
      .map((l) => {
        const o = JSON.parse(l) as { repo: string; env?: { vars?: Record<string, string>; setup?: string[] } };
        if (o.env?.vars?.HOSTILE_PORT) o.env.vars.HOSTILE_PORT = String(listener.port);
        if (o.env?.vars?.HOSTILE_SECRET) o.env.vars.HOSTILE_SECRET = secretFile;
        if (o.env?.setup) o.env.setup = o.env.setup.map((s) => s.replace('127.0.0.1:9/', `127.0.0.1:${listener.port}/`));
        return JSON.stringify({ ...o, repo: join(repos, o.repo.replace(/^repos\//, '')) });
      });
    const manifest = join(dir, 'manifest.jsonl');
    writeFileSync(manifest, lines.join('\n') + '\n');
    // Worldline's peak memory while a test prints 2 GB: its own high-water mark, polled.
    const poll = setInterval(() => {
      for (const pid of readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
        try {
          if (!readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes(out)) continue;
          const hwm = /VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
          if (hwm) peakRssKb = Math.max(peakRssKb, Number(hwm[1]));
        } catch {
          // A process that ended between listing and reading.
        }
      }
    }, 500);
    const stages = 'clone,build,validate,trace';
    runArgs = ['run', '--manifest', manifest, '--out', out, '--stages', stages, '--suite-timeout', '90', '--test-timeout', '15'];
    runArgs.push('--memory', '256', '--pids', '64', '--concurrency', '2', '--work-disk', '96');
    const res = await cli([...runArgs, '--json']).finally(() => clearInterval(poll));
    expect(res.code, res.stderr).toBe(1);
    run = JSON.parse(res.stdout) as RunJson;
  }, 900_000);

  afterAll(() => listener?.server.close());

  it('contains every attack with its recorded reason', () => {
    const failedAt = (name: string, stage: string, reason: RegExp) =>
      expect(unit(name), name).toMatchObject({ status: 'failed', stage, reason: expect.stringMatching(reason) });
    // Contained inside the test: the pids limit refuses the fork, the network and the root file system are not there.
    for (const name of ['fork-bomb', 'network-test', 'writes-outside']) expect(unit(name), name).toMatchObject({ status: 'ok' });
    // Contained around the suite: our interpreter, our environment, the process tree killed when pytest exits, the trace's outcome compared.
    for (const name of ['stdlib-rewrite', 'preload-runner', 'daemon-stdout', 'daemon-next-run', 'mutating-repr'])
      expect(unit(name), name).toMatchObject({ status: 'ok' });
    failedAt('memory-hog', 'validate', /^run 1: out of memory \(killed at the 256 MB limit\)$/);
    // Bounded by the runner's per-test limit (twice --test-timeout), well inside the 90 s suite timeout.
    failedAt('sigalrm-loop', 'validate', /^run 1: test timed out: tests\/test_loop\.py::test_spin \(per-test limit: 30 s, killed by the runner\)$/);
    failedAt('network-build', 'build', /^image build failed: setup returned a non-zero code: 1/);
    // Plain pytest's run (2 GB through the engine's stream) may meet --test-timeout on a loaded machine: then the reason says so too.
    failedAt(
      'stdout-flood',
      'validate',
      /^run 1: output capped: the suite printed \d+ bytes past the 16777216-byte cap( \(plain python3 -m pytest in the same image: [^)]*\))?$/,
    );
    failedAt('symlink-result', 'validate', /is a symlink; refused/);
    failedAt('forged-report', 'validate', /^run 1: the report was tampered with: line 1 of the report is not signed by the reporting plugin$/);
    failedAt('kill-parent', 'validate', /^run 1: the runner was killed before the suite finished \(container exit 137\)$/);
    failedAt('git-file', 'clone', /\.git is not a folder \(a pointer to a repository elsewhere\); refused/);
    failedAt('disk-filler', 'validate', /^disk budget exceeded: 100663296 bytes \(the work folder filled its --work-disk\)$/);
    // The data keep the id's exact bytes (escapes and all); only what a terminal is shown is escaped.
    failedAt('escape-id', 'validate', /^run 1: test timed out: tests\/test_ids\.py::test_id\[/);
    expect(unit('escape-id').reason).toContain('test_id[\x1b[2J\x1b]0;pwned\x07\r\nbenign  ok');
    // Short, and no host path (it was an internal error of 4.6 KB naming the work folder on the host).
    failedAt('deep-path', 'validate', /^the results could not be copied back from the work folder: File name too long \(\d+ paths?\)$/);
    expect(unit('deep-path').reason).not.toContain(out);
  });

  /** The rows of repository `repo` in part `kind`. */
  const partRows = <T>(kind: string, repo: string): T[] => {
    const parts = join(out, 'parts', kind);
    return readdirSync(parts)
      .filter((f) => f.startsWith(`${repo}-`))
      .flatMap((f) => readFileSync(join(parts, f), 'utf8').trim().split('\n'))
      .filter(Boolean)
      .map((l) => JSON.parse(l) as T);
  };
  /** The recorded row of test `name` of repository `repo` (its tests part). */
  const testRow = (repo: string, name: string) =>
    partRows<{ node_id: string; outcome: string; flaky: boolean; run_outcomes: string[] }>('tests', repo).find((r) => r.node_id.endsWith(`::${name}`));
  const outcomeOf = (repo: string, name: string) => testRow(repo, name)?.outcome;
  /** The ledger entry of `stage` for repository `repo`. */
  const ledgerEntry = <T>(stage: string, repo: string) => {
    const dir = join(out, 'ledger', stage);
    const file = readdirSync(dir).find((f) => f.startsWith(`${repo}-`)) as string;
    return JSON.parse(readFileSync(join(dir, file), 'utf8')) as { seconds: number; record: T };
  };

  it('keeps the report key out of pytest: from a .pth file the build planted (it runs first, in every interpreter) and from a search of its memory', () => {
    expect(unit('pth-key-thief')).toMatchObject({ status: 'ok' });
    expect(outcomeOf('pth-key-thief', 'test_pth_ran')).toBe('passed');
    // Before worldline_pytest.py (python3 -m pytest), the .pth read the key and put it back: this failed.
    expect(outcomeOf('pth-key-thief', 'test_key_out_of_reach')).toBe('passed');
    // The key is nowhere in pytest's process: a search of every object it holds, which finds a
    // 64-hex-digit string it is shown, finds none that signs the runner's report (this failed
    // while the plugin signed, holding the key).
    expect(outcomeOf('pth-key-thief', 'test_search_finds_a_key_it_is_shown')).toBe('passed');
    expect(outcomeOf('pth-key-thief', 'test_no_key_in_the_process')).toBe('passed');
  });

  it('runs the key holder on an interpreter the build cannot have touched: a hmac.py rewritten as root gets no key that signs the report', () => {
    expect(outcomeOf('stdlib-rewrite', 'test_the_rewrites_are_in_place')).toBe('passed');
    // It failed while the runner ran the image's python3 and its standard library.
    expect(outcomeOf('stdlib-rewrite', 'test_no_stolen_key_signs_the_report')).toBe('passed');
  });

  it("gives the unit's variables to the suite only: its LD_PRELOAD of a repository shared object and LD_DEBUG never reach the runner", () => {
    expect(outcomeOf('preload-runner', 'test_the_suite_gets_the_variables')).toBe('passed');
    // It failed while the runner ran in the container's environment, the unit's variables included.
    expect(outcomeOf('preload-runner', 'test_the_runner_does_not')).toBe('passed');
  });

  it('ends a suite when pytest exits: a setsid daemon holding its output is killed at once, and none lives into the next run', () => {
    // Every test reported, well inside the 90 s suite timeout (the runner waited for the pipe: past the timeout, a failed unit).
    expect(outcomeOf('daemon-stdout', 'test_leaves_a_daemon')).toBe('passed');
    expect(outcomeOf('daemon-stdout', 'test_ok')).toBe('passed');
    expect(ledgerEntry('validate', 'daemon-stdout').seconds).toBeLessThan(60);
    // Run 2 found run 1's daemon alive: the test was flaky.
    expect(testRow('daemon-next-run', 'test_no_daemon_from_an_earlier_run')).toMatchObject({
      outcome: 'passed',
      flaky: false,
      run_outcomes: ['passed', 'passed'],
    });
  });

  it('keeps no episodes of a test whose trace changed its outcome (a __repr__ with side effects), and counts them', () => {
    const record = ledgerEntry<TraceStageRecord>('trace', 'mutating-repr').record;
    expect(record).toMatchObject({ parity_mismatches: 1, mismatched: ['tests/test_counter.py::test_never_shown: passed -> failed'] });
    expect(record.parity_dropped_episodes).toBeGreaterThan(0);
    const traced = new Set(partRows<{ node_id: string }>('traces', 'mutating-repr').map((r) => r.node_id));
    expect([...traced]).toEqual(['tests/test_counter.py::test_double']);
  });

  it("shows a test id's escapes and newline escaped in run's table and status, never raw", async () => {
    const status = await cli(['status', '--out', out]);
    // Every stage done: the table from the ledger, with the log lines of the stages' checks.
    const again = await cli([...runArgs, '--progress', 'none']);
    expect(again.code, again.stderr).toBe(1);
    for (const [what, text] of [
      ['status', status.stdout],
      ['run', again.stdout],
      ['run (log lines)', again.stderr],
    ]) {
      if (what !== 'run (log lines)') expect(text, what).toContain('tests/test_ids.py::test_id[\\x1b[2J\\x1b]0;pwned\\x07\\r\\nbenign  ok');
      // No escape, bell or carriage return reaches the terminal, and the forged line is no line of its own.
      expect(
        [...text].filter((c) => c !== '\n' && (c < ' ' || c === '\x7f')),
        what,
      ).toEqual([]);
      expect(text, what).not.toMatch(/^benign {2}ok/m);
    }
  }, 120_000);

  it("mounts each container's work folder nosuid,nodev (seen from inside, by a test) and leaves no mount behind", () => {
    expect(outcomeOf('writes-outside', 'test_results_folder_is_nosuid_nodev')).toBe('passed');
    expect(mountsUnder(out)).toEqual([]);
    // Nor a loop device still attached to a work disk's image.
    expect(execFileSync('losetup', ['-a'], { encoding: 'utf8' })).not.toContain(out);
  });

  it('the benign unit and the contained ones are traced to the end', () => {
    for (const name of ['benign', 'fork-bomb', 'writes-outside', 'pth-key-thief', 'stdlib-rewrite', 'preload-runner', 'daemon-stdout', 'mutating-repr'])
      expect(unit(name).ran, name).toContain('trace');
  });

  it('leaves the host unchanged: no loopback connection, no host file read, no setuid or device file, no work folder, a small output folder', () => {
    expect(listener.hits()).toBe(0);
    const files = walk(out);
    for (const { path, st } of files) {
      expect(st.isFile() || st.isDirectory(), `${path} is neither a file nor a folder`).toBe(true);
      expect(st.mode & 0o6000, `${path} is setuid or setgid`).toBe(0);
      if (st.isFile()) expect(readFileSync(path).includes(secret), `${path} holds the host's secret`).toBe(false);
    }
    expect(files.filter(({ path, st }) => path.includes(`${join(out, 'work')}/`) && st.isFile())).toEqual([]);
    // 2 GB printed (twice: two validate runs); what reached the disk is the capped log at most.
    const bytes = files.reduce((n, { st }) => n + (st.isFile() ? st.size : 0), 0);
    expect(bytes).toBeLessThan(64 << 20);
    // Only the log's tail is ever read into memory.
    expect(peakRssKb).toBeGreaterThan(0);
    expect(peakRssKb).toBeLessThan(1 << 20);
  });
});

/** Hostile repository `name` run alone, clone to forage (mutation tasks only, no rollouts). */
async function forageAlone(name: string, mutations: number, tries: number) {
  const dir = tempDir(`hostile-${name}`);
  const repo = join(dir, name);
  cpSync(join(packageRoot, 'examples', 'hostile', 'repos', name), repo, { recursive: true });
  const manifest = join(dir, 'manifest.jsonl');
  writeFileSync(manifest, `${JSON.stringify({ repo })}\n`);
  const out = join(dir, 'out');
  const flags = `--stages clone,build,validate,trace,forage --json --validate-runs 1 --mutations-per-unit ${mutations} --mutation-tries ${tries} --issue-candidates 0 --policy none`;
  return { res: await cli(['run', '--manifest', manifest, '--out', out, ...flags.split(' ')]), out };
}

describe('a conftest that forges the mutant checks', () => {
  it('is caught: forage fails with the reason, where unsigned reports would have made tasks of its forged failures', async () => {
    const { res } = await forageAlone('forged-mutant', 2, 6);
    const unit = (JSON.parse(res.stdout) as RunJson).units[0];
    // validate and trace ran honestly (the conftest forges only where the mutant driver's plan is).
    expect(unit.ran, res.stderr).toEqual(['clone', 'resolve', 'build', 'validate', 'trace', 'forage']);
    expect(unit).toMatchObject({
      status: 'failed',
      stage: 'forage',
      reason: expect.stringMatching(/^mutant check \d+: the report was tampered with: line 1 of the report is not signed by the reporting plugin$/),
    });
  }, 900_000);
});

describe("a mutant check's test that rewrites another source file", () => {
  it('does not reach the next candidate: each starts from the pristine tree, so no task patch holds the rewrite', async () => {
    const { res, out } = await forageAlone('tamper-mutant', 8, 16);
    const unit = (JSON.parse(res.stdout) as RunJson).units[0];
    expect(unit, res.stderr).toMatchObject({ status: 'ok', stage: 'forage' });
    const parts = join(out, 'parts', 'tasks');
    const tasks = readdirSync(parts).flatMap((f) => readFileSync(join(parts, f), 'utf8').trim().split('\n'));
    // Mutants of the rewritten file were tried after the rewrite (without the restore, one of these patches held it).
    expect(tasks.filter((t) => t.includes('b/scale.py')).length).toBeGreaterThan(0);
    for (const t of tasks) expect(t).not.toContain('TAMPERED');
    // And the forage record says which checks changed the tree, and what was put back.
    const ledger = join(out, 'ledger', 'forage');
    const [entry] = readdirSync(ledger).filter((n) => n.endsWith('.json'));
    const record = (JSON.parse(readFileSync(join(ledger, entry), 'utf8')) as { record: ForageRecord }).record;
    expect((record.mutations_tree_restored ?? []).some((t) => t.files.includes('scale.py'))).toBe(true);
  }, 900_000);
});

describe('the build network', () => {
  it('gives package installs the mirror but not the host loopback', async () => {
    const listener = await loopbackListener();
    const dir = tempDir('build-network');
    const probe = [
      'import socket, sys',
      'socket.create_connection(("deb.debian.org", 80), timeout=10).close()',
      'try:',
      `    socket.create_connection(("127.0.0.1", ${listener.port}), timeout=5).close()`,
      '    sys.exit("reached the host loopback")',
      'except OSError:',
      '    pass',
    ].join('\n');
    writeFileSync(join(dir, 'probe.py'), probe);
    writeFileSync(join(dir, 'Dockerfile'), `FROM ${inject('base311')}\nCOPY probe.py /probe.py\nRUN python3 /probe.py\n`);
    const tag = `worldline/test-build-network:${randomBytes(4).toString('hex')}`;
    try {
      const res = await buildImage({
        context: () => tarStream(['-C', dir, 'Dockerfile', 'probe.py']),
        tag,
        logFile: join(dir, 'build.log'),
        timeoutMs: 120_000,
        memoryBytes: 256 << 20,
        cpus: 1,
      });
      expect(res.error, readFileSync(join(dir, 'build.log'), 'utf8')).toBeNull();
      expect(res.ok).toBe(true);
      expect(listener.hits()).toBe(0);
    } finally {
      listener.server.close();
      await removeImage(tag);
    }
  });
});
