/**
 * The step runner's zygote (tracers/worldline_zygote.py): runs fork from one process that imported
 * pytest once, and each is the run a cold start would have been: the same arguments, environment,
 * import path, flags, session and outcomes, the repository's code as it is at that run (never
 * imported ahead), and the report key as out of reach. Real containers of the 3.11 base image.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, inject, it } from 'vitest';
import { readResult } from '../pipeline/sandbox/results.js';
import { runSandboxed } from '../pipeline/sandbox/sandbox.js';
import { pytestCommand, readSteps, type Step, stepRun, stepsRunner } from '../pipeline/sandbox/suite_run.js';
import { tempDir } from './helpers.js';

/** Runs `steps` through the runner in a base-image container; `before` runs first in /repo (before the runner starts). */
async function runSteps(name: string, steps: Step[], opts: { zygote?: boolean; before?: string; vars?: Record<string, string> } = {}) {
  const work = tempDir(name);
  writeFileSync(join(work, 'test_probe.py'), PROBE);
  const { cmd, key } = stepsRunner(work, steps, 1 << 20);
  if (opts.zygote === false) {
    const plan = JSON.parse(readFileSync(join(work, 'steps.json'), 'utf8')) as Record<string, unknown>;
    writeFileSync(join(work, 'steps.json'), JSON.stringify({ ...plan, zygote: false }));
  }
  const res = await runSandboxed({
    image: inject('base311'),
    cmd: ['sh', '-c', `cd /repo && ${opts.before ?? 'true'} && exec "$@"`, 'sh', ...cmd],
    work,
    vars: opts.vars ?? {},
    srcLayout: false,
    limits: { memoryMb: 512, pids: 64, cpus: 1 },
    timeoutMs: 120_000,
    labels: { 'worldline.stage': 'test-zygote' },
  });
  return { work, key, steps: readSteps(work, key), output: res.output };
}

/** What a run sees of its own process, printed for comparison between a forked and a cold run. */
const PROBE = [
  'import ctypes, json, os, sys',
  'def test_probe():',
  '    libc = ctypes.CDLL(None)',
  '    try:',
  '        open("/proc/%d/mem" % os.getppid(), "rb").close()',
  '        parent_readable = True',
  '    except OSError:',
  '        parent_readable = False',
  '    print("PROBE " + json.dumps({',
  '        "argv": sys.argv, "path": sys.path, "env": dict(os.environ), "flags": list(sys.flags), "cwd": os.getcwd(),',
  '        "own_session": os.getsid(0) == os.getpid(), "stdin_null": os.path.samestat(os.fstat(0), os.stat(os.devnull)),',
  '        "dumpable": libc.prctl(3, 0, 0, 0, 0), "parent_readable": parent_readable,',
  '        "report_fd_inheritable": [os.get_inheritable(int(fd)) for fd in os.listdir("/proc/self/fd") if os.path.exists("/proc/self/fd/" + fd) and "pipe" in os.readlink("/proc/self/fd/" + fd)],',
  '        "value": __import__("mod").VALUE,',
  '    }, sort_keys=True))',
  '',
].join('\n');

const pytest = (extra: string[] = []) => [...pytestCommand([], 0, false), '-s', ...extra, '/worldline/out/test_probe.py'];
const run = (name: string, env?: Record<string, string>): Step => ({ name, run: pytest(), timeoutS: 60, testLimitS: 30, ...(env ? { env } : {}) });
/** Two runs with /repo's module changed between them (same size, same second): the second must run the new code. */
const STEPS: Step[] = [
  { name: 'code', sh: 'printf "VALUE = 1\\n" > mod.py' },
  run('first'),
  { name: 'change', sh: 'printf "VALUE = 2\\n" > mod.py' },
  run('second', { WORLDLINE_PROBE: 'second' }),
];

const probeOf = (work: string, step: string) => {
  const line = (readResult(work, `output-${step}.log`) ?? '').split('\n').find((l) => l.includes('PROBE {'));
  return line ? (JSON.parse(line.slice(line.indexOf('{'))) as Record<string, unknown>) : null;
};

describe("the step runner's zygote", () => {
  it('forks each run from one warm process, and each sees what a cold start sees, the code of its own moment included', async () => {
    const forked = await runSteps('zygote-forked', STEPS);
    const cold = await runSteps('zygote-cold', STEPS, { zygote: false });
    for (const step of ['first', 'second']) {
      expect(forked.steps.get(step), forked.output).toMatchObject({ exit: 0, zygote: true });
      expect(cold.steps.get(step), cold.output).toMatchObject({ exit: 0, zygote: false });
      const a = probeOf(forked.work, step);
      const b = probeOf(cold.work, step);
      expect(a, readResult(forked.work, `output-${step}.log`) ?? '').not.toBeNull();
      expect(a).toEqual(b);
      expect(stepRun(forked.work, forked.steps.get(step), forked.key, 30)).toMatchObject({ problem: null, tests: [{ outcome: 'passed' }] });
    }
    expect(probeOf(forked.work, 'first')).toMatchObject({ value: 1, own_session: true, stdin_null: true, dumpable: 1, parent_readable: false });
    // The module changed between the runs: the second ran its new code, so nothing of /repo was imported ahead.
    const second = probeOf(forked.work, 'second');
    expect(second).toMatchObject({ value: 2, env: expect.objectContaining({ WORLDLINE_PROBE: 'second' }) });
    expect(second?.env).not.toHaveProperty('WORLDLINE_REPORT_FD');
  });

  it('a forked run ends as a cold one does: its threads waited for, atexit handlers run, output flushed, its exit status', async () => {
    // A forked child skips the interpreter's teardown (os._exit); what a normal exit does before it must still happen.
    const steps: Step[] = [
      {
        name: 'code',
        sh: [
          'printf "VALUE = 1\\n" > mod.py',
          'cat > test_exit.py <<EOF',
          'import atexit, sys, threading, time',
          'def late():',
          '    time.sleep(0.5)',
          '    open("/tmp/thread-mark", "w").write("thread")',
          'def test_exit():',
          '    threading.Thread(target=late).start()',
          '    atexit.register(lambda: open("/tmp/atexit-mark", "w").write("atexit"))',
          '    atexit.register(lambda: sys.stdout.write("UNFLUSHED-TAIL"))',
          '    assert False',
          'EOF',
        ].join('\n'),
      },
      { name: 'exiting', run: [...pytestCommand([], 0, false), '-p', 'no:cacheprovider', 'test_exit.py'], timeoutS: 60, testLimitS: 30 },
      { name: 'marks', sh: 'cat /tmp/thread-mark /tmp/atexit-mark' },
      run('after'),
    ];
    const forked = await runSteps('zygote-exit', steps);
    const cold = await runSteps('zygote-exit-cold', steps, { zygote: false });
    expect(forked.steps.get('exiting'), forked.output).toMatchObject({ exit: 1, zygote: true });
    expect(cold.steps.get('exiting'), cold.output).toMatchObject({ exit: 1, zygote: false });
    for (const res of [forked, cold]) {
      expect(res.steps.get('marks'), res.output).toMatchObject({ exit: 0, output: 'threadatexit' });
      expect(readResult(res.work, 'output-exiting.log')).toMatch(/UNFLUSHED-TAIL$/);
    }
    // The zygote lives on after a child's quick exit: the next run forks too.
    expect(forked.steps.get('after'), forked.output).toMatchObject({ exit: 0, zygote: true });
  });

  it('starts every run cold when anything the zygote imported came from /repo', async () => {
    // A PYTHONPATH entry in /repo with a sitecustomize: site.main() imports it, in the zygote too.
    const res = await runSteps('zygote-refused', STEPS, {
      before: 'mkdir -p shadow && printf "import os\\n" > shadow/sitecustomize.py',
      vars: { PYTHONPATH: '/repo/shadow' },
    });
    for (const step of ['first', 'second']) expect(res.steps.get(step), res.output).toMatchObject({ exit: 0, zygote: false });
    expect(probeOf(res.work, 'second')).toMatchObject({ value: 2 });
  });

  it('a run that kills the zygote ends as killed, and the runs after it start cold', async () => {
    const steps: Step[] = [
      {
        name: 'code',
        sh: 'printf "VALUE = 1\\n" > mod.py && printf "import os, signal\\ndef test_kill():\\n    os.kill(os.getppid(), signal.SIGKILL)\\n" > test_kill.py',
      },
      { name: 'killer', run: [...pytestCommand([], 0, false), 'test_kill.py'], timeoutS: 60, testLimitS: 30 },
      run('after'),
    ];
    const res = await runSteps('zygote-killed', steps);
    expect(res.steps.get('killer'), res.output).toMatchObject({ exit: 137, zygote: true });
    expect(res.steps.get('after'), res.output).toMatchObject({ exit: 0, zygote: false });
    expect(probeOf(res.work, 'after')).toMatchObject({ value: 1 });
  });
});
