/**
 * pip's requirements files: one requirement a line, `\` continuations, `#` comments, `-r`/`-c`
 * includes (relative to the including file), `-e`, and pip's options (recorded, never obeyed).
 * Every entry keeps the file and 1-based line it came from. The files are read through `read`, so
 * the caller decides what may be read (a checkout, never a path outside it).
 */
import { posix } from 'node:path';
import { shellSplit } from '../../../core/shell.js';
import { normalizeName } from './names.js';
import { parseRequirement, type Requirement } from './pep508.js';

export interface Source {
  /** Relative to the checkout, with "/" separators. */
  file: string;
  /** 1-based. */
  line: number;
}

export type RequirementsEntry =
  | { kind: 'requirement'; requirement: Requirement; source: Source; constraint: boolean }
  /** `.`, `.[test]`, `-e .[dev]`: the project itself, with the extras asked for; `--group dev` (pip 25.1): its PEP 735 groups. */
  | { kind: 'self'; extras: string[]; groups?: string[]; editable: boolean; source: Source }
  /** An option pip would obey (`--index-url`, `--pre`, a local path, an unnamed URL): recorded, not used. */
  | { kind: 'option'; option: string; value?: string; source: Source }
  | { kind: 'error'; message: string; source: Source };

/** The relative path's text, or undefined when it is absent or may not be read. */
export type ReadText = (file: string) => string | undefined;

const INCLUDE = new Map([
  ['-r', false],
  ['--requirement', false],
  ['-c', true],
  ['--constraint', true],
]);
const EDITABLE = new Set(['-e', '--editable']);

/** Logical lines: continuations joined, comments dropped, each with its first physical line. */
function logicalLines(text: string): { text: string; line: number }[] {
  const out: { text: string; line: number }[] = [];
  let pending: { text: string; line: number } | undefined;
  text.split(/\r?\n/).forEach((raw, i) => {
    const cur = pending ?? { text: '', line: i + 1 };
    if (raw.endsWith('\\')) {
      cur.text += raw.slice(0, -1);
      pending = cur;
      return;
    }
    cur.text += raw;
    pending = undefined;
    const stripped = cur.text.replace(/(^|\s)#.*$/, '').trim();
    if (stripped) out.push({ text: stripped, line: cur.line });
  });
  if (pending?.text.trim()) out.push({ text: pending.text.trim(), line: pending.line });
  return out;
}

/** `.`, `./`, `.[a,b]`, `file:.`: the checkout's own project. */
function selfTarget(target: string): string[] | undefined {
  const m = /^(?:file:)?\.\/?(?:\[([^\]]*)\])?$/.exec(target.replace(/^["']|["']$/g, ''));
  if (!m) return undefined;
  return (m[1] ?? '')
    .split(',')
    .map((e) => e.trim())
    .filter(Boolean)
    .map(normalizeName);
}

/** A VCS or archive URL names its project in `#egg=name`; then it is a requirement like any other. */
function urlRequirement(target: string): Requirement | undefined {
  const egg = /[#&]egg=([A-Za-z0-9][A-Za-z0-9._-]*)/.exec(target);
  if (!egg) return undefined;
  return { name: egg[1], key: normalizeName(egg[1]), extras: [], specifiers: [], url: target };
}

/**
 * One word of an install line (a requirements line, `pip install` arguments, a tox or nox deps
 * entry) that is neither an option nor an include: a requirement, the project itself, or a path or
 * URL recorded as an option.
 */
export function installTarget(word: string, source: Source, editable = false): RequirementsEntry {
  const extras = selfTarget(word);
  if (extras) return { kind: 'self', extras, editable, source };
  if (/^[a-z][a-z0-9+.-]*:\/\/|^[a-z]+\+[a-z]+:/i.test(word) || /^[./~]|\.(whl|tar\.gz|zip)$/i.test(word) || editable) {
    const requirement = urlRequirement(word);
    return requirement
      ? { kind: 'requirement', requirement, source, constraint: false }
      : { kind: 'option', option: editable ? '--editable' : 'path', value: word, source };
  }
  try {
    return { kind: 'requirement', requirement: parseRequirement(word), source, constraint: false };
  } catch (e) {
    return { kind: 'error', message: (e as Error).message, source };
  }
}

/** Where install arguments are read: `-r` paths are relative to `base`; a constraints file's requirements are marked. */
interface Within {
  base: string;
  constraint: boolean;
  /** Files already being read: an include cycle stops. */
  seen: Set<string>;
}

const TOP: () => Within = () => ({ base: '.', constraint: false, seen: new Set() });

/**
 * The entries of `file` and of the files it includes, in order. A constraints file's requirements
 * are marked `constraint`: they bound versions and add nothing.
 */
export function readRequirementsFile(file: string, read: ReadText, within: Within = TOP()): RequirementsEntry[] {
  const normalized = posix.normalize(file);
  if (within.seen.has(normalized)) return [];
  within.seen.add(normalized);
  const text = read(normalized);
  if (text === undefined)
    return [{ kind: 'error', message: `${normalized}: absent, or not a regular file inside the checkout`, source: { file: normalized, line: 0 } }];
  const inner = { ...within, base: posix.dirname(normalized) };
  return logicalLines(text).flatMap(({ text: line, line: n }) => requirementsLine(line, { file: normalized, line: n }, read, inner));
}

/**
 * One line as pip reads a requirements file: an options line (`-r file`, `--index-url ...`), or
 * a requirement whose own options (`--hash=...`) follow it. tox `deps` lines are the same.
 */
export function requirementsLine(line: string, source: Source, read: ReadText, within: Within = TOP()): RequirementsEntry[] {
  if (line.startsWith('-')) return pipInstallArgs(shellSplit(line), source, read, within);
  // pip's own split: the requirement runs to the first word that starts with "-".
  const words = line.split(/\s+/);
  const cut = words.findIndex((w) => w.startsWith('-'));
  const entry = installTarget((cut < 0 ? words : words.slice(0, cut)).join(' '), source);
  return [entry.kind === 'requirement' && within.constraint ? { ...entry, constraint: true } : entry];
}

/** pip install options that take the next word as their value. */
const VALUED = new Set([
  '-i',
  '--index-url',
  '--extra-index-url',
  '-f',
  '--find-links',
  '-t',
  '--target',
  '--prefix',
  '--root',
  '--platform',
  '--python-version',
  '--only-binary',
  '--no-binary',
  '--trusted-host',
  '--upgrade-strategy',
  '--config-settings',
  '-C',
  '--group',
  '--progress-bar',
  '--log',
  '--cache-dir',
  '--src',
]);

/** The arguments after `pip install` (a workflow line, a nox `session.install(...)`): requirements, `-r`/`-c` files, `-e`, options. */
export function pipInstallArgs(words: string[], source: Source, read: ReadText, within: Within = TOP()): RequirementsEntry[] {
  const entries: RequirementsEntry[] = [];
  for (let i = 0; i < words.length; i++) {
    const m = /^(--?[A-Za-z-]+)(?:=(.*))?$/.exec(words[i]) ?? /^(-[rce])(.+)$/.exec(words[i]);
    if (!m) {
      const entry = installTarget(words[i], source);
      entries.push(entry.kind === 'requirement' && within.constraint ? { ...entry, constraint: true } : entry);
      continue;
    }
    const [, name, inline] = m;
    const constraint = INCLUDE.get(name);
    const takes = constraint !== undefined || EDITABLE.has(name) || VALUED.has(name);
    const value = inline ?? (takes ? words[++i] : undefined);
    if (value === undefined) entries.push({ kind: 'option', option: name, source });
    else if (constraint !== undefined)
      entries.push(...readRequirementsFile(posix.join(within.base, value), read, { ...within, constraint: within.constraint || constraint }));
    else if (EDITABLE.has(name)) entries.push(installTarget(value, source, true));
    // `--group [path:]name`: a dependency group of the pyproject.toml (of that path; ours is the only one read).
    else if (name === '--group') entries.push({ kind: 'self', extras: [], groups: [value.split(':').at(-1)!], editable: false, source });
    else entries.push({ kind: 'option', option: name, value, source });
  }
  return entries;
}
