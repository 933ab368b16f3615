/**
 * A pytest run inside a command a project's tooling runs (a tox `commands` line, a workflow `run:`
 * line, a hatch script): `pytest ...`, `python -m pytest ...`, `coverage run -m pytest ...`,
 * `poetry run pytest ...`, `FOO=1 pytest ...`. Its arguments are what the project runs its tests with.
 */
import { posix } from 'node:path';

const PYTEST = new Set(['pytest', 'py.test']);
const RUNNER = /^(python[\d.]*|coverage|uv|poetry|pdm|hatch|pipenv|rye|xvfb-run|time|env|nice|exec|run)$/;
const SEPARATORS = new Set(['&&', '||', ';', '|']);

/** The words after `pytest` up to the end of that command, or undefined when these words run no pytest. */
export function argsAfterPytest(words: string[]): string[] | undefined {
  const at = words.findIndex((w, i) => {
    if (!PYTEST.has(posix.basename(w))) return false;
    if (i === 0) return true;
    const before = words[i - 1];
    return before === '-m' || SEPARATORS.has(before) || RUNNER.test(posix.basename(before)) || /^[A-Za-z_][A-Za-z0-9_]*=/.test(before);
  });
  if (at < 0) return undefined;
  const rest = words.slice(at + 1);
  const end = rest.findIndex((w) => SEPARATORS.has(w));
  return end < 0 ? rest : rest.slice(0, end);
}
