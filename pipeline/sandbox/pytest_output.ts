/**
 * The one line of pytest's console output that says why a run stopped before (or while) it ran
 * its tests: what a person would read first in the log. The outcomes themselves never come from
 * here (a test can print anything; they come from the signed report): this only names a reason.
 */

/** An exception line as Python prints it last in a traceback: `pkg.SomeError: message`. */
const EXCEPTION = /^([A-Za-z_][\w.]*(?:Error|Exception|Warning|Exit|Interrupt|Failed))(?::\s.*)?$/;
/** pytest's headers that name the file a traceback below them belongs to. */
const WHERE = [
  /^ImportError while loading conftest '([^']+)'/,
  /^ImportError while importing test module '([^']+)'/,
  /^_+ ERROR collecting (\S+) _+$/,
  /^_+ ERROR at setup of .* _+$/,
];
const REPO = /^\/repo\//;

/** `path` as the repository knows it (relative to /repo). */
const repoPath = (path: string) => path.replace(REPO, '');

/**
 * The first real error in `output` (pytest's console output of one run), e.g.
 * `ModuleNotFoundError: No module named 'hypothesis' (tests/conftest.py)` or
 * `pytest: error: unrecognized arguments: --cov`; null when there is none to name.
 */
export function firstErrorLine(output: string): string | null {
  const lines = output.split('\n').map((l) => l.replace(/\r$/, ''));
  let where: string | null = null;
  let traceback = false;
  for (const raw of lines) {
    const line = raw.trimEnd();
    for (const pattern of WHERE) {
      const m = pattern.exec(line);
      if (m) where = m[1] ? repoPath(m[1]) : null;
    }
    // A usage error: pytest's own words, on the line after "ERROR: usage: ...".
    const usage = /^(?:pytest|__main__\.py): error: (.+)$/.exec(line);
    if (usage) return `pytest: error: ${usage[1]}`;
    const plain = /^ERROR: (?!usage:)(.+)$/.exec(line);
    if (plain) return plain[1];
    // A line pytest marks with "E" in a traceback it formats (collection, conftest import).
    const marked = /^E\s+(.+)$/.exec(line);
    if (marked && EXCEPTION.test(marked[1].trim())) return withWhere(marked[1].trim(), where);
    // A traceback Python printed itself (pytest crashed at start-up, a warning turned error there).
    if (/^(INTERNALERROR> )?Traceback \(most recent call last\):$/.test(line)) traceback = true;
    else if (traceback) {
      const body = line.replace(/^INTERNALERROR> /, '');
      const file = /^\s+File "([^"]+)", line \d+/.exec(body);
      if (file && REPO.test(file[1])) where = repoPath(file[1]);
      if (!/^\s/.test(body) && EXCEPTION.test(body)) return withWhere(body, where);
    }
  }
  return null;
}

function withWhere(error: string, where: string | null): string {
  const short = error.length > 400 ? `${error.slice(0, 400)}...` : error;
  return where ? `${short} (${where})` : short;
}
