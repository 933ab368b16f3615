/**
 * Fix or feature: whether a mined candidate fixes behaviour that was wrong, judged first by how its
 * FAIL_TO_PASS tests fail on the task state, then by what its messages and issue say.
 *
 * A test that fails only because a name the gold patch adds does not exist yet (ImportError,
 * AttributeError, NameError, an unexpected keyword argument, a missing module) tests a feature:
 * no behaviour was wrong before, something was absent. A test failing for any other reason (an
 * assertion, a wrong value, an exception from the old code) shows a behaviour the fix changed.
 * Messages and issues (fix, bug, regression, error, a linked issue, a bug label, a revert), a
 * failure showing an error the old code did not raise in code the fix changes or one it raised
 * from a line the fix removes, and the shape of the gold patch (adding public names or a version)
 * only move the confidence; they never turn a feature into a fix.
 */
import type { IssueText } from './issue_export.js';

const IDENTIFIER = /[A-Za-z_][A-Za-z0-9_]*/g;

/**
 * Names the gold patch adds: more often on its added lines than on its removed ones (a new
 * parameter, function or attribute; a name only moved around is not new), and the modules it creates.
 */
export function addedNames(patch: string): Set<string> {
  const balance = new Map<string, number>();
  const modules = new Set<string>();
  const lines = patch.split('\n');
  const count = (line: string, by: number) => {
    for (const m of line.matchAll(IDENTIFIER)) balance.set(m[0], (balance.get(m[0]) ?? 0) + by);
  };
  for (const [i, line] of lines.entries()) {
    if (line.startsWith('+++ b/') && lines[i - 1] === '--- /dev/null') {
      const path = line
        .slice(6)
        .replace(/\/__init__\.py$/, '')
        .replace(/\.py$/, '');
      for (const part of path.split('/')) modules.add(part);
    } else if (line.startsWith('+') && !line.startsWith('+++')) count(line, 1);
    else if (line.startsWith('-') && !line.startsWith('---')) count(line, -1);
  }
  return new Set([...modules, ...[...balance].filter(([, n]) => n > 0).map(([name]) => name)]);
}

/** What a missing name looks like in a failure message: the name, or null. */
const MISSING = [
  /cannot import name '(\w+)'/,
  /has no attribute '(\w+)'/,
  /name '(\w+)' is not defined/,
  /unexpected keyword argument '(\w+)'/,
  /No module named '(?:[\w.]+\.)?(\w+)'/,
];

/** A protocol an object lacks, by the TypeError Python raises, and the special methods that would give it. */
const MISSING_PROTOCOL: [RegExp, string[]][] = [
  [/is not subscriptable/, ['__getitem__', '__class_getitem__']],
  [/is not iterable/, ['__iter__']],
  [/is not callable/, ['__call__']],
  [/has no len\(\)/, ['__len__']],
  [/is not reversible/, ['__reversed__']],
  [/does not support item assignment/, ['__setitem__']],
  [/does not support the context manager protocol|object does not support the asynchronous context manager/, ['__enter__', '__aenter__']],
];

/** The name a failure message says is missing, when the gold patch adds it; else null (a behavioural failure). */
export function missingAddedName(message: string | null, added: Set<string>): string | null {
  if (!message) return null;
  for (const re of MISSING) {
    const m = re.exec(message);
    if (m && added.has(m[1])) return m[1];
  }
  for (const [re, methods] of MISSING_PROTOCOL) {
    const method = re.test(message) ? methods.find((m) => added.has(m)) : undefined;
    if (method) return method;
  }
  return null;
}

/** A call that no longer fits a function's parameters: the function's name, when its signature is what changed. */
const SIGNATURE_MISMATCH =
  /(\w+)\(\) (?:takes \d+ positional arguments? but \d+ (?:was|were) given|missing \d+ required (?:positional|keyword-only) arguments?)/;

/** Functions whose `def` line the gold patch rewrites (a new signature: new parameters, or fewer). */
export function changedSignatures(patch: string): Set<string> {
  const removed = new Map<string, string>();
  const added = new Map<string, string>();
  for (const line of patch.split('\n')) {
    const m = /^([-+])\s*(?:async\s+)?def\s+(\w+)\s*\((.*)$/.exec(line);
    if (m && !line.startsWith('---') && !line.startsWith('+++')) (m[1] === '-' ? removed : added).set(m[2], m[3].replace(/\s+/g, ''));
  }
  return new Set([...added].filter(([name, params]) => removed.has(name) && removed.get(name) !== params).map(([name]) => name));
}

/**
 * The error lines (`E   ...`) of each "ERROR collecting <module>" section of pytest's output, by
 * module: the report holds only a collection error's first line ("ImportError while importing
 * test module ..."), while the name that is missing is further down.
 */
export function collectionErrorText(log: string): Map<string, string> {
  const out = new Map<string, string>();
  let module: string | null = null;
  for (const line of log.split('\n')) {
    const header = /^_{2,} ERROR collecting (\S+) _{2,}$/.exec(line);
    if (header) module = header[1];
    else if (/^(_{2,} |={2,})/.test(line)) module = null;
    else if (module && line.startsWith('E ')) out.set(module, `${out.get(module) ?? ''}${line.slice(1).trim()}\n`);
  }
  return out;
}

/**
 * A judge of before-fix failures that are only a timeout in a test the test patch leaves alone:
 * on a loaded machine a slow test times out on either side of a fix, which says nothing about it.
 */
export function loadTimeouts(testPatch: string): (nodeid: string, message: string | null) => boolean {
  // Test functions the patch adds, or changes lines in (a hunk header names the enclosing def).
  const touched = new Set([...testPatch.matchAll(/^(?:\+\s*def |@@ .*@@.*\bdef )(test\w*)/gm)].map((m) => m[1]));
  return (nodeid, message) => /^Failed: Timeout/.test(message ?? '') && !touched.has(nodeid.split('::').at(-1)!.replace(/\[.*$/, ''));
}

const FIX_WORDS =
  /\b(fix(es|ed|ing)?|bugs?|bugfix|regressions?|errors?|crash(es|ed)?|wrong|incorrect(ly)?|broken|fails?|failing|failure|exception|hangs?|leaks?|typo)\b/i;
/** What a feature, a deprecation or a refactor says in its title, even under "Fix #N:". */
const FEATURE_WORDS =
  /\b(add(s|ed|ing)?|new|deprecat(e|es|ed|ion)|drop(s|ped)?|convert(s|ed)?|refactor(s|ed|ing)?|speed( up)?|faster|performance|optimi[sz](e|es|ed|ation))\b/i;
const BUG_LABEL = /\b(bug|regression|defect|crash)\b/i;
const REVERT = /^\s*Revert\b/i;

/** The title of a change: a pull request's title (the merge message's first body line), else the subject. */
function titleOf(message: string): string {
  const [subject, ...body] = message.split('\n');
  return /^Merge (pull request|branch)/i.test(subject) ? (body.find((l) => l.trim()) ?? subject) : subject;
}

/**
 * Secondary signals: fix words in the messages, a linked issue, its labels and text, a revert
 * (each one `+`); a feature word in the title (`-`), unless the title reverts that change.
 */
export function messageSignals(messages: string[], issueNumber: number | null, issue: IssueText | null): string[] {
  const signals: string[] = [];
  const word = messages.map((m) => FIX_WORDS.exec(m)?.[0]).find(Boolean);
  if (word) signals.push(`message:${word.toLowerCase()}`);
  if (issueNumber !== null) signals.push(`issue:#${issueNumber}`);
  if (issue) {
    const label = issue.labels.find((l) => BUG_LABEL.test(l));
    if (label) signals.push(`label:${label}`);
    const word = FIX_WORDS.exec(`${issue.title}\n${issue.body}`)?.[0];
    if (word) signals.push(`issue_text:${word.toLowerCase()}`);
  }
  const title = messages.length ? titleOf(messages[0]) : '';
  // A revert undoes a change that broke something; the feature words are the reverted change's ("Revert \"Faster x\"").
  if (REVERT.test(title)) signals.push('message:revert');
  const feature = REVERT.test(title) ? undefined : FEATURE_WORDS.exec(title)?.[0];
  if (feature) signals.push(`-feature_word:${feature.toLowerCase()}`);
  return signals;
}

/** A line of code, not a blank line or a comment. */
const isCodeLine = (body: string): boolean => body.trim() !== '' && !body.trim().startsWith('#');
const DEFINITION = /^\s*(?:async\s+)?(?:def|class)\s+(\w+)/;

/**
 * Whether the gold patch changes code that was already there: it removes or rewrites a line, or
 * adds lines inside an existing function (a guard, a missing case) rather than a new definition.
 */
function changesExistingCode(patch: string): boolean {
  // Whether git names an enclosing definition in the hunk's header, and whether this hunk has added a definition yet.
  let inDefinition = false;
  let addedDefinition = false;
  for (const line of patch.split('\n')) {
    if (line.startsWith('+++') || line.startsWith('---')) continue;
    if (line.startsWith('@@')) {
      inDefinition = DEFINITION.test(line.replace(/^@@[^@]*@@/, ''));
      addedDefinition = false;
    } else if (line.startsWith('-') && isCodeLine(line.slice(1))) return true;
    else if (line.startsWith('+') && isCodeLine(line.slice(1))) {
      const body = line.slice(1);
      if (DEFINITION.test(body)) addedDefinition = true;
      else if (inDefinition && !addedDefinition && !body.trimStart().startsWith('@')) return true;
    }
  }
  return false;
}

/** A public name: not private, or a special method (`__repr__`, `__eq__`: a protocol the class newly offers). */
const isPublic = (name: string): boolean => !name.startsWith('_') || /^__\w+__$/.test(name);

/**
 * Functions the gold patch makes return a value they did not, and documents so: a `return <value>`
 * added where no `return` is removed, beside an added docstring or comment line that speaks of what
 * it returns. That is a new contract (a feature asked for), where a forgotten return (a fix) finds
 * the contract already documented and adds only the statement.
 */
function newReturnValues(patch: string): string[] {
  const seen = new Map<string, { added: boolean; removed: boolean; documented: boolean }>();
  let fn: string | null = null;
  // Whether the new side's line starts inside a docstring, and the new side's previous line.
  let inDoc = false;
  let previous = '';
  for (const line of patch.split('\n')) {
    if (line.startsWith('+++') || line.startsWith('---')) continue;
    if (line.startsWith('diff ')) fn = null;
    if (line.startsWith('@@')) {
      // A header naming a class (git's default funcname) leaves the hunk in the function the last one was in.
      fn = /^\s*(?:async\s+)?def\s+(\w+)/.exec(line.replace(/^@@[^@]*@@/, ''))?.[1] ?? fn;
      inDoc = false;
      continue;
    }
    const body = line.slice(1);
    const quotes = (body.match(/"""|'''/g) ?? []).length;
    const prose = line[0] !== '-' && (inDoc || quotes > 0 || body.trimStart().startsWith('#'));
    if (line[0] !== '-') {
      // A lone quote opens a docstring only right under a `def` or `class` line: in a hunk that starts
      // inside a docstring, the quote that closes it must not open one.
      const opens = /^\s*[rRuU]?("""|''')/.test(body) && (body.trim().length > 3 || /:\s*$/.test(previous));
      if (quotes % 2 === 1) inDoc = !inDoc && opens;
      previous = body;
    }
    const def = /^\s*(?:async\s+)?def\s+(\w+)/.exec(body);
    if (def) fn = def[1];
    if (!fn || def || line[0] === ' ') continue;
    const f = seen.get(fn) ?? { added: false, removed: false, documented: false };
    seen.set(fn, f);
    const statement = !prose && /^\s*return\b/.test(body);
    if (line[0] === '-' && /^\s*return\b/.test(body)) f.removed = true;
    else if (line[0] === '+' && statement && !/^\s*return\s*(None\s*)?(#.*)?$/.test(body)) f.added = true;
    else if (line[0] === '+' && prose && /\breturns?\b/i.test(body)) f.documented = true;
  }
  return [...seen].filter(([, f]) => f.added && !f.removed && f.documented).map(([name]) => name);
}

/**
 * Feature signals in the gold patch itself: new public functions, classes or special methods
 * (`-patch:new_public_name:<name>`), a documented new return value (`-patch:new_return_value:<name>`)
 * and a new `__version__` (`-patch:version_bump`).
 */
export function patchSignals(patch: string): string[] {
  const removedNames = new Set<string>();
  const newNames = new Set<string>();
  let bump = false;
  for (const line of patch.split('\n')) {
    if (line.startsWith('+++') || line.startsWith('---')) continue;
    const name = DEFINITION.exec(line.slice(1))?.[1];
    if (line.startsWith('-') && name) removedNames.add(name);
    else if (line.startsWith('+') && name && isPublic(name)) newNames.add(name);
    if (line.startsWith('+') && /^__version__\s*=/.test(line.slice(1).trim())) bump = true;
  }
  const signals = [...newNames]
    .filter((n) => !removedNames.has(n))
    .sort()
    .map((n) => `-patch:new_public_name:${n}`);
  signals.push(...newReturnValues(patch).map((n) => `-patch:new_return_value:${n}`));
  if (bump) signals.push('-patch:version_bump');
  return signals;
}

/**
 * A failure saying the old code did not raise the error the test expects, or raised another one:
 * pytest's "DID NOT RAISE", unittest's "not raised", a `match=`/assertRaisesRegex mismatch, or an
 * exception class on the expected side of a comparison.
 */
const EXPECTED_ERROR = /DID NOT RAISE|\bnot raised\b|does not match|Regex pattern did not match|(Error|Exception)'>\]?\s*$/m;

/** String literals on the lines the gold patch removes, long enough to identify an error message. */
function removedLiterals(patch: string): string[] {
  const lines = patch.split('\n').filter((l) => l.startsWith('-') && !l.startsWith('---'));
  return lines.flatMap((l) => [...l.matchAll(/(["'])((?:(?!\1).){12,})\1/g)].map((m) => m[2]));
}

export interface FixVerdict {
  /** Null when it is a fix; else why it is not. */
  feature: string | null;
  /** 0..1: 0.6 x the share of behavioural failures, +0.1 per fix signal, -0.2 per feature signal. */
  fix_confidence: number;
  signals: string[];
}

/** The confidence below which a candidate is not kept as a fix: behavioural failures and at least one fix signal. */
export const MIN_FIX_CONFIDENCE = 0.7;

/**
 * Judges a candidate from its FAIL_TO_PASS tests' failures on the task state (each test's message,
 * or its module's collection error) and its message signals. It is a fix when most of its
 * FAIL_TO_PASS tests fail behaviourally and the confidence reaches `minConfidence`.
 */
export function judgeFix(
  failures: { nodeid: string; message: string | null }[],
  patch: string,
  given: string[],
  minConfidence = MIN_FIX_CONFIDENCE,
): FixVerdict {
  const added = addedNames(patch);
  // A test calling a function with the parameters the gold patch gives it tests the new signature, not a fix.
  const signatures = changedSignatures(patch);
  const signatureOf = (message: string | null) => {
    const name = SIGNATURE_MISMATCH.exec(message ?? '')?.[1];
    return name && signatures.has(name) ? name : null;
  };
  const missing = failures.map((f) => ({ ...f, name: missingAddedName(f.message, added) ?? signatureOf(f.message) }));
  const behavioural = missing.filter((f) => f.name === null);
  // Old code that accepts what it should reject, in a function the fix changes: the shape of a validation fix.
  const expectedError = behavioural.some((f) => EXPECTED_ERROR.test(f.message ?? '')) && changesExistingCode(patch);
  // An error the old code raised on input the test calls valid, whose raise the fix takes out (an over-strict check).
  const literals = removedLiterals(patch);
  const removedError = behavioural.some((f) => literals.some((l) => (f.message ?? '').split('\n')[0].includes(l)));
  const signals = [...given, ...(expectedError ? ['failure:expected_error'] : []), ...(removedError ? ['failure:removed_error'] : [])];
  const all = [`behavioural_failures:${behavioural.length}/${failures.length}`, ...signals];
  const score = 0.6 * (behavioural.length / failures.length) + signals.reduce((s, x) => s + (x.startsWith('-') ? -0.2 : 0.1), 0);
  const fix_confidence = Math.max(0, Math.min(1, Math.round(score * 100) / 100));
  if (behavioural.length * 2 <= failures.length) {
    const names = [...new Set(missing.map((f) => f.name).filter((n) => n !== null))];
    const example = (missing.find((f) => f.name)!.message ?? '').split('\n')[0].slice(0, 160);
    const how = behavioural.length ? `${failures.length - behavioural.length} of ${failures.length}` : 'every one of the';
    return {
      feature: `a feature, not a fix: ${how} FAIL_TO_PASS tests fail only because the gold patch adds ${names.map((n) => `'${n}'`).join(', ')} (${example})`,
      fix_confidence,
      signals: all,
    };
  }
  if (fix_confidence < minConfidence) {
    return { feature: `not shown to be a fix: confidence ${fix_confidence} below ${minConfidence} (${all.join(', ')})`, fix_confidence, signals: all };
  }
  return { feature: null, fix_confidence, signals: all };
}
