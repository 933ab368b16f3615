/**
 * pytest's own JUnit XML (`--junitxml`), read back into one outcome per test: what a plain
 * `python3 -m pytest` run said, with no code of ours in its process. Only the `testcase`
 * elements pytest writes are read (attributes and the kind of their first result child); the
 * file is capped by results.ts before it gets here.
 */

/** The outcome classes JUnit can tell apart (a non-strict xpass is a pass there). */
export type JunitOutcome = 'passed' | 'failed' | 'error' | 'skipped' | 'xfailed';

export interface JunitCase {
  /** pytest's key for a test in JUnit: classname and name joined by `::` (see junitKey). */
  key: string;
  outcome: JunitOutcome;
  /**
   * Not a test: a module that failed to collect (`error`) or skipped itself whole at import
   * (`skipped`, `pytest.importorskip` at module level); pytest writes each as a test case of that
   * module, with an empty classname.
   */
  collectError: boolean;
  moduleSkip: boolean;
  message: string | null;
}

const ENTITIES: Record<string, string> = { lt: '<', gt: '>', amp: '&', quot: '"', apos: "'" };

function unescapeXml(text: string): string {
  return text.replace(/&(#x[0-9a-fA-F]+|#\d+|\w+);/g, (whole, body: string) => {
    if (body.startsWith('#x')) return String.fromCodePoint(Number.parseInt(body.slice(2), 16));
    if (body.startsWith('#')) return String.fromCodePoint(Number.parseInt(body.slice(1), 10));
    return ENTITIES[body] ?? whole;
  });
}

function attributes(text: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const m of text.matchAll(/([\w:-]+)\s*=\s*(?:"([^"]*)"|'([^']*)')/g)) out[m[1]] = unescapeXml(m[2] ?? m[3] ?? '');
  return out;
}

/**
 * The key pytest's JUnit writer gives a node id (its `mangle_test_address`): the file path dotted
 * without `.py`, the classes, and the test name with its parameters, classname and name joined
 * by `::`. Our node ids go through this to meet JUnit's.
 */
export function junitKey(nodeid: string): string {
  const bracket = nodeid.indexOf('[');
  const path = bracket === -1 ? nodeid : nodeid.slice(0, bracket);
  const params = bracket === -1 ? '' : nodeid.slice(bracket);
  const names = path.split('::');
  names[0] = names[0].replace(/\//g, '.').replace(/\.py$/, '');
  names[names.length - 1] += params;
  return `${names.slice(0, -1).join('.')}::${names[names.length - 1]}`;
}

function outcomeOf(body: string): { outcome: JunitOutcome; message: string | null; collectError: boolean } {
  const child = /<(failure|error|skipped)\b([^>]*?)\/?>/.exec(body);
  if (!child) return { outcome: 'passed', message: null, collectError: false };
  const attrs = attributes(child[2]);
  const message = attrs.message ?? null;
  if (child[1] === 'skipped') return { outcome: attrs.type === 'pytest.xfail' ? 'xfailed' : 'skipped', message, collectError: false };
  if (child[1] === 'failure') return { outcome: 'failed', message, collectError: false };
  // A failed call with a failing teardown has both; the call decides, as in our report.
  if (/<failure\b/.test(body)) return { outcome: 'failed', message, collectError: false };
  return { outcome: 'error', message, collectError: message === 'collection failure' };
}

/** Every test case of a JUnit XML text, in file order. */
export function readJunit(xml: string): JunitCase[] {
  const cases: JunitCase[] = [];
  for (const m of xml.matchAll(/<testcase\b([^>]*?)(?:\/>|>([\s\S]*?)<\/testcase>)/g)) {
    const attrs = attributes(m[1]);
    const outcome = outcomeOf(m[2] ?? '');
    const moduleSkip = !attrs.classname && outcome.outcome === 'skipped';
    cases.push({ key: `${attrs.classname ?? ''}::${attrs.name ?? ''}`, ...outcome, moduleSkip });
  }
  return cases;
}
