/**
 * pip's requirements files: one requirement a line, `\` continuations, `#` comments, `-r`/`-c`
 * includes (relative to the including file), `-e`, and pip's options (recorded, never obeyed).
 * Every entry keeps the file and 1-based line it came from. The files are read through `read`, so
 * the caller decides what may be read (a checkout, never a path outside it).
 */
import { posix } from 'node:path';
import { normalizeName } from './names.js';
import { parseRequirement, type Requirement } from './requirements.js';

export interface Source {
  /** Relative to the checkout, with "/" separators. */
  file: string;
  /** 1-based. */
  line: number;
}

export type RequirementsEntry =
  | { kind: 'requirement'; requirement: Requirement; source: Source; constraint: boolean }
  /** `.`, `.[test]`, `-e .[dev]`: the project itself, with the extras asked for. */
  | { kind: 'self'; extras: string[]; editable: boolean; source: Source }
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

/**
 * The entries of `file` and of the files it includes, in order. A constraints file's requirements
 * are marked `constraint`: they bound versions and add nothing.
 */
export function readRequirementsFile(file: string, read: ReadText, constraint = false, seen = new Set<string>()): RequirementsEntry[] {
  const normalized = posix.normalize(file);
  if (seen.has(normalized)) return [];
  seen.add(normalized);
  const text = read(normalized);
  if (text === undefined) return [{ kind: 'error', message: `${normalized} is missing`, source: { file: normalized, line: 0 } }];
  const entries: RequirementsEntry[] = [];
  for (const { text: line, line: n } of logicalLines(text)) {
    const source = { file: normalized, line: n };
    const opt = /^(--?[A-Za-z-]+)(?:[=\s]\s*(.*))?$/.exec(line) ?? /^(-[rce])(\S.*)$/.exec(line);
    if (!opt) {
      // "name==1.0 --hash=sha256:..." : per-requirement options follow the requirement.
      const [word] = line.split(/\s+--?[a-z]/i);
      const entry = installTarget(word.trim(), source);
      entries.push(entry.kind === 'requirement' ? { ...entry, constraint } : entry);
      continue;
    }
    const [, name, value] = opt;
    const includeIsConstraint = INCLUDE.get(name);
    if (includeIsConstraint !== undefined && value) {
      entries.push(...readRequirementsFile(posix.join(posix.dirname(normalized), value.trim()), read, constraint || includeIsConstraint, seen));
    } else if (EDITABLE.has(name) && value) {
      entries.push(installTarget(value.trim(), source, true));
    } else {
      entries.push({ kind: 'option', option: name, ...(value?.trim() ? { value: value.trim() } : {}), source });
    }
  }
  return entries;
}
