import { bool, defineSchema, float64, type Infer, list, nullable, string } from './schema.js';

/** One row per test of a validated unit, identified by its pytest node id. */
export const testsSchema = defineSchema({
  name: 'tests',
  version: 2,
  doc: "One row per test of each validated repository, keyed by pytest's node id, with its outcome in every validation run.",
  fields: {
    unit_id: string('The unit this test belongs to'),
    repo: string('The repository as the manifest names it'),
    commit: string('Resolved commit SHA'),
    node_id: string("pytest's node id"),
    file: string('Test file, relative to the repository root'),
    outcome: string('First run: passed, failed, error, skipped, xfailed, xpassed or missing'),
    run_outcomes: list(string(), 'Outcome in each run, in order'),
    flaky: bool('Outcome differed between runs; flaky tests stay out of FAIL_TO_PASS and PASS_TO_PASS'),
    unstable_id: bool('The id was not there in every run (it embeds the time, say): not flaky, and never traced or graded'),
    message: nullable(string('First line of the failure, skip or error reason')),
    duration_seconds: float64('setup + call + teardown in the first run (timing)'),
    image_id: string('Environment image id the test ran in'),
    python_version: string('Python version inside the image'),
    pytest_version: string('pytest version inside the image'),
  },
});

export type TestRecord = Infer<typeof testsSchema>;
