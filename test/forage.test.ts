/**
 * Mutation-fix tasks on the real corpus: mutants of functions the passing tests reach, kept only
 * when a test goes pass -> fail; every task graded in fresh containers with no submission and
 * with its gold fix.
 */

import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, inject, it } from 'vitest';
import { readRows } from '../datasets/reader.js';
import { AgentEnv } from '../pipeline/agent/agent_env.js';
import { type GradeEnv, gradeSubmission } from '../pipeline/agent/grading.js';
import { DEFAULTS } from '../pipeline/runtime/options.js';
import type { TaskRecord } from '../schemas/tasks.js';
import type { TrajectoryRecord } from '../schemas/trajectories.js';
import { cli, sql, tempDir } from './helpers.js';

const UNITS = ['toolz', 'h11'];

describe('mutation-fix tasks on the real corpus', () => {
  let out: string;
  let tasks: TaskRecord[];
  let trajectories: TrajectoryRecord[];

  beforeAll(async () => {
    const dir = tempDir('forage');
    out = join(dir, 'out');
    const manifest = join(dir, 'manifest.jsonl');
    writeFileSync(manifest, UNITS.map((u) => JSON.stringify({ repo: join(inject('corpusRoot'), u) })).join('\n') + '\n');
    const res = await cli(['run', '--manifest', manifest, '--out', out, '--validate-runs', '1', '--mutations-per-unit', '5', '--mutation-tries', '60']);
    expect(res.code, res.stderr).toBe(0);
    tasks = [];
    for await (const row of readRows(join(out, 'dataset'), { config: 'tasks' })) tasks.push(row as unknown as TaskRecord);
    trajectories = [];
    for await (const row of readRows(join(out, 'dataset'), { config: 'trajectories' })) trajectories.push(row as unknown as TrajectoryRecord);
  }, 900_000);

  it('keeps mutants from at least three operators per repository, with SWE-bench fields', () => {
    for (const unit of UNITS) {
      const mine = tasks.filter((t) => t.repo === unit);
      expect(mine.length, unit).toBeGreaterThanOrEqual(3);
      expect(new Set(mine.map((t) => t.operator)).size, unit).toBeGreaterThanOrEqual(3);
    }
    for (const t of tasks) {
      expect(t.instance_id).toMatch(new RegExp(`^(toolz|h11)\\.${t.base_commit.slice(0, 8)}\\.${t.operator}__[0-9a-f]{8}$`));
      expect(t.kind).toBe('mutation_fix');
      expect(t.FAIL_TO_PASS.length).toBeGreaterThan(0);
      expect(t.FAIL_TO_PASS.filter((id) => t.PASS_TO_PASS.includes(id))).toEqual([]);
      expect(t.bug_patch).toMatch(/^--- a\/.*\n\+\+\+ b\//);
      // The statement names the symptom, never the fix.
      const removed = t
        .bug_patch!.split('\n')
        .filter((l) => l.startsWith('-') && !l.startsWith('---'))
        .map((l) => l.slice(1).trim())
        .filter((l) => l.length > 8);
      for (const line of removed) expect(t.problem_statement).not.toContain(line);
      expect(t.problem_statement).toContain(t.FAIL_TO_PASS[0]);
    }
  });

  it('every task fails without a fix and is resolved by its gold fix, each graded in a fresh container', async () => {
    const env = (_task: TaskRecord, i: number): GradeEnv => ({
      options: { ...DEFAULTS, out },
      srcLayout: false,
      vars: {},
      pytestArgs: [],
      hasTimeoutPlugin: true,
      work: join(out, 'work', 'grade-test', `${i}`),
    });
    for (const [i, t] of tasks.entries()) {
      const empty = await gradeSubmission(t, null, env(t, i));
      expect(empty.resolved, t.instance_id).toBe(false);
      expect(empty.fail_to_pass.failed, t.instance_id).toEqual(t.FAIL_TO_PASS);
      expect(empty.pass_to_pass.failed, t.instance_id).toEqual([]);
      const gold = await gradeSubmission(t, t.patch, env(t, i));
      expect(gold.resolved, `${t.instance_id}: ${JSON.stringify(gold.fail_to_pass.failed)}`).toBe(true);
    }
  }, 900_000);

  it('grading resolves none of the hostile submissions, nor a fix that breaks a PASS_TO_PASS test', async () => {
    // A task whose first failing test is a plain function, so that redefining it is easy.
    const plain = (id: string) => /^[^:]+::\w+$/.test(id);
    const task = tasks.find((t) => t.repo === 'toolz' && plain(t.FAIL_TO_PASS[0]) && t.PASS_TO_PASS.some(plain))!;
    expect(task).toBeDefined();
    const [testFile, testName] = task.FAIL_TO_PASS[0].split('::');
    const fixed = /^\+\+\+ b\/(\S+)/m.exec(task.patch)![1];
    const all = [...task.FAIL_TO_PASS, ...task.PASS_TO_PASS];
    const b64 = (s: string) => Buffer.from(s).toString('base64');
    /** The diff an agent would submit after running `script` in the task state. */
    const submission = async (script: string): Promise<string> => {
      const env = await AgentEnv.start(task, {}, { memoryMb: 1024, cpus: 1, pids: 256, bashTimeoutS: 30, outputCap: 2_000_000 });
      try {
        const res = await env.exec(['sh', '-c', `set -e; ${script}`], 60);
        expect(res.exitCode, res.output).toBe(0);
        const sub = await env.call({ id: 's', name: 'submit', arguments: '{}' });
        expect(sub.submitted, script).toBeTruthy();
        return sub.submitted!;
      } finally {
        await env.close();
      }
    };
    const append = (file: string, code: string) => `echo ${b64(code)} | base64 -d >> ${file}`;
    const forcePass = [
      'import pytest',
      '@pytest.hookimpl(hookwrapper=True)',
      'def pytest_runtest_makereport(item, call):',
      '    outcome = yield',
      '    outcome.get_result().outcome = "passed"',
      '',
    ].join('\n');
    const fakeReport = [
      { event: 'start' },
      { event: 'collected', nodeids: all },
      ...all.flatMap((nodeid) => ['setup', 'call', 'teardown'].map((when) => ({ event: 'test', nodeid, when, outcome: 'passed', duration: 0.01 }))),
      { event: 'finish', exitstatus: 0 },
    ]
      .map((r) => `${JSON.stringify(r)}\n`)
      .join('');
    const hostile: Record<string, string> = {
      'prints fake PASSED lines': append(
        fixed,
        `\nprint(${JSON.stringify(all.map((t) => `${t} PASSED`).join('\n'))})\nprint("===== ${all.length} passed in 0.10s =====")\n`,
      ),
      'adds a conftest.py that forces every outcome to passed': `echo ${b64(forcePass)} | base64 -d > conftest.py; echo ${b64(forcePass)} | base64 -d >> ${testFile.replace(/[^/]+$/, '')}conftest.py`,
      'adds a pytest.ini that loads a forcing plugin': `echo ${b64(forcePass)} | base64 -d > force_pass.py; printf '[pytest]\\naddopts = -p force_pass\\n' > pytest.ini`,
      'redefines the failing test to pass': append(testFile, `\n\ndef ${testName}():\n    pass\n`),
      'deletes the failing test file': `rm ${testFile}`,
      'overwrites the report file and exits 0': append(
        fixed,
        [
          '',
          'import atexit as _a, glob as _g, os as _o',
          'def _forge():',
          '    env = dict(kv.split("=", 1) for kv in open("/proc/self/environ").read().split("\\0") if "=" in kv)',
          '    for path in [env.get("WORLDLINE_REPORT", "")] + _g.glob("/worldline/out/*.jsonl"):',
          '        if path:',
          `            open(path, "w").write(${JSON.stringify(fakeReport)})`,
          '    _o._exit(0)',
          '_a.register(_forge)',
          '',
        ].join('\n'),
      ),
      "calls the reporting plugin's hook with a fake passing report": append(
        fixed,
        [
          '',
          'import sys as _s',
          'class _Fake:',
          `    nodeid, when, outcome, duration, passed, longrepr = ${JSON.stringify(task.FAIL_TO_PASS[0])}, "call", "passed", 0.0, True, None`,
          'if "worldline_report" in _s.modules:',
          '    _s.modules["worldline_report"].pytest_runtest_logreport(_Fake())',
          '',
        ].join('\n'),
      ),
    };
    const env = (name: string): GradeEnv => ({
      options: { ...DEFAULTS, out },
      srcLayout: false,
      vars: {},
      pytestArgs: [],
      hasTimeoutPlugin: true,
      work: join(out, 'work', 'grade-hostile', name.replace(/\W+/g, '-')),
    });
    for (const [name, script] of Object.entries(hostile)) {
      const grade = await gradeSubmission(task, await submission(script), env(name));
      expect(grade.resolved, `${name}: ${JSON.stringify(grade)}`).toBe(false);
      expect(grade.applied, name).toBe(true);
      // Forged reports would have read as all-passed: only the signature check stands in their way.
      if (/report/.test(name)) expect(grade.problem, name).toMatch(/tampered/);
    }
    // The same tricks must not be what failed: the gold fix with the fake PASSED lines resolves.
    const goldPlusNoise = await submission(`echo ${b64(task.patch)} | base64 -d | git apply; ${hostile['prints fake PASSED lines']}`);
    expect((await gradeSubmission(task, goldPlusNoise, env('gold-plus-noise'))).resolved).toBe(true);

    // The gold fix plus a line that breaks one PASS_TO_PASS test only: those reach the mutated
    // function too, so it raises when called from that test.
    const victim = task.PASS_TO_PASS.find(plain)!.split('::')[1];
    const breakIt = [
      'import ast, sys',
      'path, name, victim = sys.argv[1:]',
      'src = open(path).read()',
      'fn = next(n for n in ast.walk(ast.parse(src)) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == name)',
      'lines = src.splitlines(True)',
      'lines.insert(fn.body[0].lineno - 1, " " * fn.body[0].col_offset + "if %r in [f.function for f in __import__(\'inspect\').stack()]: raise RuntimeError(\'broken on purpose\')\\n" % victim)',
      'open(path, "w").write("".join(lines))',
      '',
    ].join('\n');
    const breaking = await submission(
      `echo ${b64(task.patch)} | base64 -d | git apply; echo ${b64(breakIt)} | base64 -d > /tmp/break.py; python3 /tmp/break.py ${fixed} ${task.mutated_function!.split('.').pop()} ${victim}`,
    );
    const grade = await gradeSubmission(task, breaking, env('breaks-p2p'));
    expect(grade.resolved).toBe(false);
    expect(grade.fail_to_pass.failed).toEqual([]);
    expect(new Set(grade.pass_to_pass.failed.map((id) => id.split('::')[1]))).toEqual(new Set([victim]));
  }, 900_000);

  it('the oracle resolves every task through the real tools, verified in a fresh container', () => {
    expect(trajectories.map((t) => t.task_id).sort()).toEqual(tasks.map((t) => t.instance_id).sort());
    for (const t of trajectories) {
      expect(t, t.task_id).toMatchObject({ policy: 'oracle', resolved: true, reward: 1, exit_status: 'submitted' });
      expect(t.steps.map((s) => s.action.split(' ')[0])).toEqual(['bash', ...t.steps.slice(1, -2).map((s) => s.action.split(' ')[0]), 'bash', 'submit']);
      expect(t.steps[0].exit_code).not.toBe(0);
      expect(t.steps.at(-2)!.exit_code).toBe(0);
      expect(t.submission).toMatch(/^diff --git /);
      expect(t.messages[1]).toMatchObject({ role: 'user' });
      expect(t.messages.filter((m) => m.role === 'tool').length).toBe(t.steps.length);
    }
  });

  it('a rollout container holds no trace of the original code, and malformed tool calls become error observations', async () => {
    let checked = 0;
    for (const task of tasks) {
      const original = task
        .bug_patch!.split('\n')
        .filter((l) => l.startsWith('-') && !l.startsWith('---'))
        .map((l) => l.slice(1))
        .filter((l) => l.trim().length > 6);
      const env = await AgentEnv.start(task, {}, { memoryMb: 1024, cpus: 1, pids: 256, bashTimeoutS: 5, outputCap: 2_000_000 });
      try {
        for (const line of original) {
          // Skip lines that legitimately occur elsewhere in the task state.
          const inTree = await env.exec(['grep', '-rFq', '--exclude-dir=.git', line.trim(), '/repo'], 30);
          if (inTree.exitCode === 0) continue;
          const objects = await env.exec(['sh', '-c', 'git cat-file --batch-all-objects --batch; git reflog; git log --all --format=%H; ls -a /tmp'], 60);
          expect(objects.output, task.instance_id).not.toContain(line.trim());
          checked += 1;
        }
        const history = await env.exec(['sh', '-c', 'git rev-list --all | wc -l; git reflog | wc -l'], 30);
        expect(history.output.trim().split(/\s+/)).toEqual(['1', '1']);
        if (task !== tasks[0]) continue;
        const bad = await env.call({ id: 'x', name: 'edit', arguments: '{"path": "setup.py", ' });
        expect(bad).toMatchObject({ error: true, output: expect.stringMatching(/^error: the arguments of edit are not valid JSON/) });
        const unknown = await env.call({ id: 'y', name: 'rm_rf', arguments: '{}' });
        expect(unknown).toMatchObject({ error: true, output: expect.stringMatching(/^error: unknown tool "rm_rf"/) });
        const missing = await env.call({ id: 'z', name: 'view', arguments: '{}' });
        expect(missing.output).toBe('error: view needs "path" (strings)');
        const slow = await env.call({ id: 'w', name: 'bash', arguments: JSON.stringify({ command: 'sleep 30' }) });
        expect(slow.output).toContain('[timed out after 5 s]');
        const noNet = await env.call({ id: 'v', name: 'bash', arguments: JSON.stringify({ command: 'ls /sys/class/net' }) });
        expect(noNet.output.trim()).toBe('lo');
      } finally {
        await env.close();
      }
    }
    expect(checked).toBeGreaterThan(0);
  }, 600_000);

  it('renders trajectories as chat messages for SFT and as transitions for world-model training', async () => {
    const messages = await cli(['render', join(out, 'dataset'), '--config', 'trajectories', '--format', 'messages']);
    expect(messages.code).toBe(0);
    const convs = messages.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { trajectory_id: string; messages: { role: string; tool_calls?: unknown[]; tool_call_id?: string }[] });
    expect(convs.length).toBe(trajectories.length);
    for (const c of convs) {
      const t = trajectories.find((x) => x.trajectory_id === c.trajectory_id)!;
      expect(c.messages.map((m) => m.role)).toEqual(t.messages.map((m) => m.role));
      expect(c.messages.filter((m) => m.role === 'assistant').every((m) => m.tool_calls?.length === 1)).toBe(true);
      expect(c.messages.filter((m) => m.role === 'tool').every((m) => typeof m.tool_call_id === 'string')).toBe(true);
    }
    const transitions = await cli(['render', join(out, 'dataset'), '--config', 'trajectories', '--format', 'transitions']);
    const rows = transitions.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { trajectory_id: string; step: number; state: string; action: string; next_state: string; reward: number; done: boolean });
    expect(rows.length).toBe(trajectories.reduce((n, t) => n + t.steps.length, 0));
    for (const t of trajectories) {
      const mine = rows.filter((r) => r.trajectory_id === t.trajectory_id);
      expect(mine[0].state).toBe(t.messages[1].content);
      for (const [i, r] of mine.slice(1).entries()) expect(r.state).toBe(mine[i].next_state);
      expect(mine.map((r) => r.reward)).toEqual([...mine.slice(0, -1).map(() => 0), 1]);
      expect(mine.at(-1)!.done).toBe(true);
    }
    const wrong = await cli(['render', join(out, 'dataset'), '--config', 'trajectories', '--format', 'text']);
    expect(wrong.code).toBe(2);
  });

  it("traces each task's FAIL_TO_PASS tests before and after the fix, marked with the task and phase", async () => {
    const rows = await sql<{ task_id: string; phase: string; node_id: string; n: bigint }>(
      `select task_id, phase, node_id, count(*) as n from '${out}/dataset/traces/data/*.parquet' where task_id is not null group by all`,
    );
    for (const t of tasks) {
      for (const phase of ['before', 'after']) {
        const traced = new Set(rows.filter((r) => r.task_id === t.instance_id && r.phase === phase).map((r) => r.node_id));
        expect(traced.size, `${t.instance_id} ${phase}`).toBeGreaterThan(0);
        for (const id of traced) expect(t.FAIL_TO_PASS).toContain(id);
      }
    }
  });
});
