/**
 * pytest's command line as words: the options whose value is the next word, so that word is no
 * test path. Unit pytest arguments are read with it where a run names its own tests
 * (sandbox/suite_run.ts) and where a project's own pytest invocation is read (envs/plan/pytest_env.ts).
 */
export const PYTEST_OPTIONS_WITH_VALUE = new Set(
  '-k -m -p -c -o -W -r -n --deselect --ignore --ignore-glob --rootdir --confcutdir --basetemp --timeout --durations --maxfail --tb --import-mode --log-level --log-cli-level --log-file --log-format --junitxml --junit-xml --override-ini --capture --cov --cov-report --cov-config --doctest-glob --color --dist --numprocesses'.split(
    ' ',
  ),
);
