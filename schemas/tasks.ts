import { defineSchema, float64, type Infer, list, nullable, string } from './schema.js';

/**
 * One row per software-engineering task, SWE-bench compatible (instance_id, repo, base_commit,
 * patch = the gold fix, test_patch, problem_statement, FAIL_TO_PASS, PASS_TO_PASS) plus the
 * task's kind and, for mutations, the bug patch: the task state is base_commit + bug_patch.
 */
export const tasksSchema = defineSchema({
  name: 'tasks',
  version: 2,
  doc: 'Software-engineering tasks in the repository environments, SWE-bench compatible: issue fixes mined from history and injected-mutation fixes.',
  text: ['problem_statement', 'patch', 'test_patch'],
  fields: {
    instance_id: string('<repo>.<commit8>.<operator>__<hash> for mutations; <repo>.<commit8>.issue__<hash> for issue fixes'),
    kind: string('issue_fix or mutation_fix'),
    repo: string('The repository: its URL, or the folder name of a local path'),
    unit_id: string('The unit whose environment image the task runs in'),
    base_commit: string('The commit the task starts from'),
    patch: string('The gold fix, a unified diff against the task state'),
    test_patch: string('Test changes applied to the task state (empty for mutations)'),
    bug_patch: nullable(string('mutation_fix: the diff that injected the bug into base_commit')),
    problem_statement: string('What the solver is told: the issue text, or the failing tests and their errors (never the fix)'),
    hints_text: nullable(string('Extra context, e.g. issue comments')),
    FAIL_TO_PASS: list(string(), 'pytest node ids that fail on the task state and pass with the fix'),
    PASS_TO_PASS: list(string(), 'pytest node ids that pass both before and after the fix (flaky tests excluded)'),
    operator: nullable(string('mutation_fix: the mutation operator')),
    mutated_function: nullable(string('mutation_fix: the qualified name of the mutated function')),
    fix_commit: nullable(string('issue_fix: the commit that fixed it')),
    issue_number: nullable(string('issue_fix: the issue number matched in the commit message')),
    image_id: string(
      "The environment image's id: its config digest (sha256:...), which a registry push and pull keep; the dataset's images.json (worldline push) says where to pull it",
    ),
    python_version: string('Python version inside the image'),
    fix_confidence: nullable(
      float64('issue_fix: 0..1, how surely it fixes wrong behaviour (FAIL_TO_PASS tests failing behaviourally, then message and issue signals)'),
    ),
    fix_signals: nullable(list(string(), 'issue_fix: the evidence behind fix_confidence, e.g. behavioural_failures:2/2, message:fix, issue:#12, label:bug')),
    statement_source: nullable(
      string(
        'issue_fix: issue (the linked issue text), model (written by --statement-model from the failing tests) or failing_tests (written from the failing tests on the task state)',
      ),
    ),
    aux_patch: nullable(string('issue_fix: the same change to docs, changelogs, CI and packaging; not graded, not part of patch')),
  },
});

export type TaskRecord = Infer<typeof tasksSchema>;
