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

/**
 * `python -m unittest discover [-s DIR] [-p PATTERN]` (or `discover DIR PATTERN`) as the pytest
 * arguments that collect the same tests: pytest runs unittest's TestCases, but finds only files
 * named by its own `python_files` (`test_*.py`), not unittest's `test*.py` or a project's own
 * `*TestCase.py` (pyvene). Undefined when these words run no unittest discovery.
 */
export function unittestDiscoverArgs(words: string[]): string[] | undefined {
  const at = words.findIndex((w, i) => w === 'discover' && words[i - 1] === 'unittest' && words[i - 2] === '-m');
  if (at < 0) return undefined;
  const rest = words.slice(at + 1);
  const end = rest.findIndex((w) => SEPARATORS.has(w));
  const own = end < 0 ? rest : rest.slice(0, end);
  const flag = (short: string, long: string) => {
    const i = own.findIndex((w) => w === short || w === long);
    return i >= 0 ? own[i + 1] : own.find((w) => w.startsWith(`${long}=`))?.slice(long.length + 1);
  };
  const positional = own.filter((w, i) => !w.startsWith('-') && !/^-/.test(own[i - 1] ?? ''));
  const dir = flag('-s', '--start-directory') ?? positional[0];
  const pattern = flag('-p', '--pattern') ?? positional[1] ?? 'test*.py';
  return [...(dir && dir !== '.' ? [dir] : []), '-o', `python_files=${pattern}`];
}
