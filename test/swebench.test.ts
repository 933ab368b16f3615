/** SWE-bench JSON Lines: export and import round trip, SWE-bench's own rows, and bad input named by line. */
import { describe, expect, it } from 'vitest';
import { exportSwebench, formatImportErrors, importSwebench, SWEBENCH_FIELDS } from '../datasets/swebench.js';
import type { TaskRecord } from '../schemas/tasks.js';

const issueTask: TaskRecord = {
  instance_id: 'slugs.0123abcd.issue__deadbeef',
  kind: 'issue_fix',
  repo: '/data/slugs',
  unit_id: 'slugs-1a2b3c4d',
  base_commit: 'a'.repeat(40),
  patch:
    'diff --git a/slugs/__init__.py b/slugs/__init__.py\n--- a/slugs/__init__.py\n+++ b/slugs/__init__.py\n@@ -8 +8,2 @@\n         slug = "%s-%d" % (base, n)\n+        n += 1\n',
  test_patch: 'diff --git a/tests/test_unique.py b/tests/test_unique.py\n',
  bug_patch: 'diff --git a/tests/test_unique.py b/tests/test_unique.py\n--- "quoted" \\ \u00e9\n',
  problem_statement: 'unique_slug hangs\n\nWith "hello-2" taken it never returns.\n',
  hints_text: null,
  FAIL_TO_PASS: ['tests/test_unique.py::test_several_taken_suffixes'],
  PASS_TO_PASS: ['tests/test_unique.py::test_free_slug_is_kept', 'tests/test_unique.py::test_p[a-"b"]'],
  operator: null,
  mutated_function: null,
  fix_commit: 'b'.repeat(40),
  issue_number: '3',
  image_id: 'sha256:' + 'c'.repeat(64),
  python_version: '3.11.2',
  fix_confidence: 0.8,
  fix_signals: ['behavioural_failures:1/1', 'issue:#3'],
  statement_source: 'issue',
  aux_patch: '--- a/CHANGES.rst\n+++ b/CHANGES.rst\n',
};

const mutationTask: TaskRecord = {
  ...issueTask,
  instance_id: 'slugs.0123abcd.binary_op__cafef00d',
  kind: 'mutation_fix',
  test_patch: '',
  bug_patch: '--- a/x.py\n+++ b/x.py\n',
  problem_statement: 'These tests fail ...',
  hints_text: 'a hint',
  PASS_TO_PASS: [],
  operator: 'binary_op',
  mutated_function: 'unique_slug',
  fix_commit: null,
  issue_number: null,
};

/** A row as SWE-bench (princeton-nlp/SWE-bench) ships it. */
const SWEBENCH_ROW = {
  repo: 'astropy/astropy',
  instance_id: 'astropy__astropy-12907',
  base_commit: 'd16bfe05a744909de4b27f5875fe0d4ed41ce607',
  patch: 'diff --git a/astropy/modeling/separable.py b/astropy/modeling/separable.py\n',
  test_patch: 'diff --git a/astropy/modeling/tests/test_separable.py b/astropy/modeling/tests/test_separable.py\n',
  problem_statement: "Modeling's `separability_matrix` does not compute separability correctly for nested CompoundModels\n",
  hints_text: '',
  created_at: '2022-03-03T15:14:54Z',
  version: '4.3',
  FAIL_TO_PASS: '["astropy/modeling/tests/test_separable.py::test_separable[compound_model6-result6]"]',
  PASS_TO_PASS: '["astropy/modeling/tests/test_separable.py::test_coord_matrix", "astropy/modeling/tests/test_separable.py::test_cdot"]',
  environment_setup_commit: '298ccb478e6bf092953bca67a3d29dc6c35f6752',
  difficulty: '15 min - 1 hour',
};

describe('SWE-bench JSON Lines', () => {
  it('exports SWE-bench rows (F2P/P2P as JSON strings) and imports them back to the same tasks', () => {
    const text = exportSwebench([issueTask, { ...mutationTask, created_at: '2024-01-04T12:00:00Z', version: '1.0' }]);
    const lines = text.trimEnd().split('\n');
    expect(lines).toHaveLength(2);
    const row = JSON.parse(lines[0]) as Record<string, unknown>;
    expect(typeof row.FAIL_TO_PASS).toBe('string');
    expect(JSON.parse(row.FAIL_TO_PASS as string)).toEqual(issueTask.FAIL_TO_PASS);
    expect(JSON.parse(row.PASS_TO_PASS as string)).toEqual(issueTask.PASS_TO_PASS);
    expect(row.hints_text).toBe('');
    expect(Object.keys(row).slice(0, 7)).toEqual(['repo', 'instance_id', 'base_commit', 'patch', 'test_patch', 'problem_statement', 'hints_text']);
    expect(JSON.parse(lines[1])).toMatchObject({ created_at: '2024-01-04T12:00:00Z', version: '1.0', kind: 'mutation_fix', bug_patch: mutationTask.bug_patch });

    const { tasks, errors } = importSwebench(text, 'tasks.jsonl');
    expect(errors).toEqual([]);
    const strip = ({ created_at: _c, version: _v, environment_setup_commit: _e, extra: _x, line: _l, ...rest }: (typeof tasks)[number]) => rest;
    expect(tasks.map(strip)).toEqual([issueTask, mutationTask]);
    expect(tasks.map((t) => [t.line, t.created_at, t.version])).toEqual([
      [1, null, null],
      [2, '2024-01-04T12:00:00Z', '1.0'],
    ]);
    // And again: the export of the import is the same text.
    expect(exportSwebench(tasks.map((t) => ({ ...t, unit_id: t.unit_id!, image_id: t.image_id!, python_version: t.python_version! })))).toBe(text);
  });

  it('with SWE-bench fields only, writes just those and refuses mutation tasks', () => {
    const row = JSON.parse(exportSwebench([issueTask], { swebenchOnly: true })) as Record<string, unknown>;
    expect(Object.keys(row).every((k) => (SWEBENCH_FIELDS as readonly string[]).includes(k))).toBe(true);
    expect(() => exportSwebench([mutationTask], { swebenchOnly: true })).toThrow(/binary_op__cafef00d: a mutation_fix task cannot be written/);
  });

  it("imports SWE-bench's own rows as issue-fix tasks, F2P/P2P as JSON strings or arrays", () => {
    const asArrays = {
      ...SWEBENCH_ROW,
      instance_id: 'astropy__astropy-1',
      FAIL_TO_PASS: ['a.py::t'],
      PASS_TO_PASS: [],
      version: 4.3,
      created_at: 1646320494000,
    };
    const { tasks, errors } = importSwebench([JSON.stringify(SWEBENCH_ROW), '', JSON.stringify(asArrays)].join('\n') + '\n', 'swe.jsonl');
    expect(errors).toEqual([]);
    expect(tasks[0]).toMatchObject({
      instance_id: 'astropy__astropy-12907',
      kind: 'issue_fix',
      repo: 'astropy/astropy',
      bug_patch: null,
      hints_text: null,
      FAIL_TO_PASS: ['astropy/modeling/tests/test_separable.py::test_separable[compound_model6-result6]'],
      PASS_TO_PASS: ['astropy/modeling/tests/test_separable.py::test_coord_matrix', 'astropy/modeling/tests/test_separable.py::test_cdot'],
      environment_setup_commit: '298ccb478e6bf092953bca67a3d29dc6c35f6752',
      unit_id: null,
      image_id: null,
      extra: { difficulty: '15 min - 1 hour' },
      line: 1,
    });
    expect(tasks[1]).toMatchObject({ FAIL_TO_PASS: ['a.py::t'], PASS_TO_PASS: [], version: '4.3', created_at: '2022-03-03T15:14:54.000Z', line: 3 });
  });

  it('names the line and the problem of every bad line, and keeps the good ones', () => {
    const { instance_id: _id, ...noId } = SWEBENCH_ROW;
    const { patch: _p, test_patch: _t, ...noPatches } = SWEBENCH_ROW;
    const bad = [
      JSON.stringify(SWEBENCH_ROW),
      '{"repo": "x",',
      '[1, 2]',
      JSON.stringify(noId),
      JSON.stringify(noPatches),
      JSON.stringify({ ...SWEBENCH_ROW, instance_id: 'u', pull_number: 5, labels: [] }),
      JSON.stringify({ ...SWEBENCH_ROW, instance_id: 'f', FAIL_TO_PASS: '[not json' }),
      JSON.stringify({ ...SWEBENCH_ROW, instance_id: 'g', PASS_TO_PASS: [1, 2] }),
      JSON.stringify({ ...SWEBENCH_ROW, instance_id: 'h', FAIL_TO_PASS: '[]' }),
      JSON.stringify({ ...SWEBENCH_ROW, instance_id: 'i', patch: 42 }),
      JSON.stringify({ ...SWEBENCH_ROW, instance_id: 'j', kind: 'refactor' }),
      JSON.stringify({ ...SWEBENCH_ROW, instance_id: 'k', kind: 'mutation_fix' }),
      JSON.stringify(SWEBENCH_ROW),
    ].join('\n');
    const { tasks, errors } = importSwebench(bad, 'bad.jsonl');
    expect(tasks.map((t) => t.instance_id)).toEqual(['astropy__astropy-12907']);
    expect(errors.map((e) => [e.line, e.message])).toEqual([
      [2, expect.stringMatching(/^not valid JSON/)],
      [3, 'each line must be a JSON object'],
      [4, 'missing required field: instance_id'],
      [5, 'missing required fields: patch, test_patch'],
      [6, 'unknown fields: pull_number, labels'],
      [7, expect.stringMatching(/^"FAIL_TO_PASS" is a string but not JSON/)],
      [8, '"PASS_TO_PASS" must be a list of test ids (a JSON array of strings, or a string holding one)'],
      [9, '"FAIL_TO_PASS" is empty: a task needs at least one test that the fix makes pass'],
      [10, '"patch" must be a string (got number)'],
      [11, '"kind" must be issue_fix or mutation_fix (got "refactor")'],
      [12, 'a mutation_fix task needs "bug_patch"'],
      [13, 'instance_id astropy__astropy-12907 already appeared on line 1'],
    ]);
    expect(formatImportErrors(errors).split('\n')[2]).toBe('bad.jsonl:4: missing required field: instance_id');
  });
});
