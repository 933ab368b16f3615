/**
 * Mutation-fix tasks on the real corpus: mutants of functions the passing tests reach, kept only
 * when a test goes pass -> fail; every task graded in fresh containers with no submission and
 * with its gold fix.
 */
import { join } from 'node:path';
import { writeFileSync } from 'node:fs';
import { beforeAll, describe, expect, inject, it } from 'vitest';
import { readRows } from '../datasets/reader.js';
import { gradeSubmission, type GradeEnv } from '../pipeline/grading.js';
import { DEFAULTS } from '../pipeline/options.js';
import type { TaskRecord } from '../schemas/tasks.js';
import { cli, tempDir } from './helpers.js';

const UNITS = ['toolz', 'h11'];

describe('mutation-fix tasks on the real corpus', () => {
  let out: string;
  let tasks: TaskRecord[];

  beforeAll(async () => {
    const dir = tempDir('forage');
    out = join(dir, 'out');
    const manifest = join(dir, 'manifest.jsonl');
    writeFileSync(manifest, UNITS.map((u) => JSON.stringify({ repo: join(inject('corpusRoot'), u) })).join('\n') + '\n');
    const res = await cli(['run', '--manifest', manifest, '--out', out, '--validate-runs', '1', '--mutations-per-unit', '5', '--mutation-tries', '60']);
    expect(res.code, res.stderr).toBe(0);
    tasks = [];
    for await (const row of readRows(join(out, 'dataset'), { config: 'tasks' })) tasks.push(row as unknown as TaskRecord);
  }, 900_000);

  it('keeps mutants from at least three operators per repository, with SWE-bench fields', () => {
    for (const unit of UNITS) {
      const mine = tasks.filter((t) => t.repo.endsWith(`/${unit}`));
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
      const removed = t.bug_patch!.split('\n').filter((l) => l.startsWith('-') && !l.startsWith('---')).map((l) => l.slice(1).trim()).filter((l) => l.length > 8);
      for (const line of removed) expect(t.problem_statement).not.toContain(line);
      expect(t.problem_statement).toContain(t.FAIL_TO_PASS[0]);
    }
  });

  it('every task fails without a fix and is resolved by its gold fix, each graded in a fresh container', async () => {
    const env = (t: TaskRecord, i: number): GradeEnv => ({
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
});
