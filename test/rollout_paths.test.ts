/**
 * The paths a rollout rarely takes, each on real containers: a model (the scripted server) that
 * never submits runs out of its turn budget inside `worldline run`, and the unresolved trajectory
 * is kept in the dataset with reward 0 (read back by DuckDB); the token and wall budgets each end
 * a rollout with their own exit status; the `create` tool writes a new file that the submission
 * carries; and validate's per-test timeout kills a hanging test while the suite completes.
 */

import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { packageRoot } from '../core/package.js';
import { readRows } from '../datasets/reader.js';
import type { Policy, PolicyTurn } from '../pipeline/agent/policy.js';
import { type Budgets, rollout } from '../pipeline/agent/rollout.js';
import type { TaskRecord } from '../schemas/tasks.js';
import { gradeEnvs, runEnvFor, TEST_LIMITS } from './fixtures/rollout_env.js';
import { call, completion, ScriptedServer } from './fixtures/scripted_openai.js';
import { cli, sql, tempDir } from './helpers.js';

const calc = join(packageRoot, 'examples', 'repos', 'calc');

/** A model stand-in that answers turn k with `turns(k)`, charging `tokens` per turn. */
function scripted(turns: (k: number) => { name: string; args: unknown }, tokens = 0): Policy & { asked: number } {
  const p = {
    name: 'scripted',
    model: 'scripted-model',
    asked: 0,
    async next(): Promise<PolicyTurn> {
      const k = p.asked++;
      const t = turns(k);
      return { content: `turn ${k}`, toolCalls: [{ id: `c${k}`, name: t.name, arguments: JSON.stringify(t.args) }], promptTokens: tokens, completionTokens: 0 };
    },
  };
  return p;
}

describe('rollout budgets, the create tool and unresolved trajectories', () => {
  let out: string;
  let task: TaskRecord;
  const server = new ScriptedServer((i) =>
    completion(i, { content: 'Looking around.', tool_calls: [call(`c${i}`, 'bash', { command: 'ls' })] }, { prompt_tokens: 50, completion_tokens: 5 }),
  );
  const limits = TEST_LIMITS;
  const runEnv = runEnvFor(true);
  const gradeEnv = gradeEnvs(() => out, true, 'grade-paths');

  beforeAll(async () => {
    const baseURL = await server.start();
    const dir = tempDir('rollout-paths');
    out = join(dir, 'out');
    const manifest = join(dir, 'manifest.jsonl');
    writeFileSync(manifest, `${JSON.stringify({ repo: calc })}\n`);
    const res = await cli(
      [
        'run',
        '--manifest',
        manifest,
        '--out',
        out,
        '--validate-runs',
        '1',
        '--mutations-per-unit',
        '1',
        '--mutation-tries',
        '30',
        '--issue-candidates',
        '0',
        '--policy',
        'openai',
        '--base-url',
        baseURL,
        '--model',
        'scripted-model',
        '--max-turns',
        '3',
      ],
      { OPENAI_API_KEY: 'test-key' },
    );
    expect(res.code, res.stderr).toBe(0);
    for await (const row of readRows(join(out, 'dataset'), { config: 'tasks' })) task = row as unknown as TaskRecord;
    expect(task).toBeDefined();
  }, 900_000);

  afterAll(() => server.close());

  it('a model that never submits ends at the turn budget, and its unresolved trajectory is in the dataset with reward 0', async () => {
    // Exactly three model calls: the budget, not the script, ended the rollout.
    expect(server.requests).toHaveLength(3);
    const rows = await sql<{
      task_id: string;
      policy: string;
      exit_status: string;
      turns: number;
      resolved: boolean;
      reward: number;
      submission: string | null;
      steps: bigint;
      prompt_tokens: bigint;
    }>(
      `select task_id, policy, exit_status, turns, resolved, reward, submission, len(steps) as steps, prompt_tokens from '${out}/dataset/trajectories/data/*.parquet'`,
    );
    expect(rows).toEqual([
      {
        task_id: task.instance_id,
        policy: 'openai',
        exit_status: 'max_turns',
        turns: 3,
        resolved: false,
        reward: 0,
        submission: null,
        steps: 3n,
        prompt_tokens: 150n,
      },
    ]);
  });

  it('the token budget ends a rollout with max_tokens once the turns used more than it allows', async () => {
    const policy = scripted(() => ({ name: 'bash', args: { command: 'true' } }), 400);
    const budgets: Budgets = { maxTurns: 10, maxTokens: 1000, maxWallS: 600 };
    const traj = await rollout(task, policy, budgets, limits, runEnv, gradeEnv());
    // 400 + 400 + 400 = 1200 > 1000 after the third turn; the fourth is never asked for.
    expect(traj).toMatchObject({ exit_status: 'max_tokens', turns: 3, prompt_tokens: 1200, resolved: false, reward: 0, submission: null, max_tokens: 1000 });
    expect(policy.asked).toBe(3);
  }, 300_000);

  it('the wall budget ends a rollout with timeout, and a bash call never runs past it', async () => {
    const policy = scripted(() => ({ name: 'bash', args: { command: 'sleep 120; echo slept' } }));
    const budgets: Budgets = { maxTurns: 10, maxTokens: 1000, maxWallS: 20 };
    const traj = await rollout(task, policy, budgets, limits, runEnv, gradeEnv());
    expect(traj).toMatchObject({ exit_status: 'timeout', resolved: false, reward: 0, max_wall_seconds: 20 });
    // The one bash call was cut at the budget, not at its own 60 s limit.
    expect(traj.turns).toBe(1);
    expect(traj.steps[0].observation).not.toContain('slept');
    expect(traj.steps[0].exit_code).toBe(124);
    expect(traj.wall_seconds).toBeLessThan(60);
  }, 300_000);

  it('the create tool writes a new file (parents made) that the code can import and the submission carries; an existing path is refused', async () => {
    const content = 'def double(x):\n    return 2 * x\n';
    const steps = [
      { name: 'create', args: { path: 'src/calc/extra/helpers.py', content } },
      { name: 'create', args: { path: 'src/calc/extra/__init__.py', content: '' } },
      { name: 'bash', args: { command: 'python3 -c "from calc.extra.helpers import double; print(double(21))"' } },
      { name: 'create', args: { path: 'src/calc/evaluator.py', content: 'oops' } },
      { name: 'view', args: { path: 'src/calc/extra/helpers.py' } },
      { name: 'submit', args: {} },
    ];
    const policy = scripted((k) => steps[k]);
    const traj = await rollout(task, policy, { maxTurns: 10, maxTokens: 1000, maxWallS: 600 }, limits, runEnv, gradeEnv());
    expect(traj.exit_status).toBe('submitted');
    expect(traj.steps.map((s) => s.observation)).toEqual([
      'created src/calc/extra/helpers.py',
      'created src/calc/extra/__init__.py',
      '42\n',
      'error: src/calc/evaluator.py already exists; use edit to change it',
      '1  def double(x):\n2      return 2 * x\n3  ',
      'submitted',
    ]);
    expect(traj.steps.map((s) => s.exit_code)).toEqual([0, 0, 0, 1, 0, 0]);
    expect(traj.submission).toContain('diff --git a/src/calc/extra/helpers.py b/src/calc/extra/helpers.py\nnew file mode 100644');
    expect(traj.submission).toContain('+def double(x):\n+    return 2 * x\n');
    // The refused create left the existing file alone; the bug is still there, so it is unresolved.
    expect(traj.submission).not.toContain('evaluator.py');
    expect(traj).toMatchObject({ resolved: false, reward: 0 });
  }, 300_000);
});

describe("validate's per-test timeout", () => {
  it('kills a hanging test as failed with a timeout message while the rest of the suite completes', async () => {
    const dir = tempDir('test-timeout');
    const out = join(dir, 'out');
    const manifest = join(dir, 'manifest.jsonl');
    writeFileSync(manifest, `${JSON.stringify({ repo: join(packageRoot, 'examples', 'repos', 'hangs') })}\n`);
    const res = await cli([
      'run',
      '--manifest',
      manifest,
      '--out',
      out,
      '--stages',
      'clone,build,validate,shard',
      '--validate-runs',
      '1',
      '--test-timeout',
      '3',
      '--suite-timeout',
      '300',
      '--json',
    ]);
    expect(res.code, res.stderr).toBe(0);
    const run = JSON.parse(res.stdout) as { units: { status: string }[] };
    expect(run.units.map((u) => u.status)).toEqual(['ok']);
    const rows = await sql<{ node_id: string; outcome: string; message: string | null; duration_seconds: number }>(
      `select node_id, outcome, message, duration_seconds from '${out}/dataset/tests/data/*.parquet' order by node_id`,
    );
    expect(rows.map((r) => [r.node_id, r.outcome])).toEqual([
      ['tests/test_hangs.py::test_hangs_forever', 'failed'],
      ['tests/test_hangs.py::test_quick', 'passed'],
    ]);
    expect(rows[0].message).toMatch(/Timeout/);
    // Cut at the 3 s limit, not at the 300 s suite timeout (pytest-timeout's timer and the report's
    // clock are not the same clock: 2.9995 s was seen).
    expect(rows[0].duration_seconds).toBeGreaterThanOrEqual(2.9);
    expect(rows[0].duration_seconds).toBeLessThan(60);
  }, 600_000);
});
