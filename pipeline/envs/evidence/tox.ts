/**
 * tox's INI configuration (tox.ini, setup.cfg's [tox:tox], pyproject's legacy_tox_ini): each
 * test env's `deps` (factor conditions such as `py38: mock` kept, `-r` files followed), `extras`,
 * `commands` (the pytest invocation), `setenv`, and the Python versions `envlist` and `basepython`
 * name. `{[section]key}` references are expanded; `{toxinidir}` is the checkout.
 */
import { shellSplit } from '../../../core/shell.js';
import { requirementsLine } from '../requirements/file.js';
import { normalizeName } from '../requirements/names.js';
import { withMarker } from '../requirements/pep508.js';
import { type EvidenceContext, type Group, groupOfName, type Source } from './context.js';
import { type IniSection, parseIni } from './ini.js';
import { argsAfterPytest } from './pytest_invocation.js';

type Line = { text: string; line: number };

/** `py{38,39}-django{3,4}` -> py38-django3, py38-django4, py39-django3, py39-django4. */
function expandBraces(text: string): string[] {
  const m = /\{([^{}]*)\}/.exec(text);
  if (!m) return [text];
  return m[1].split(',').flatMap((alt) => expandBraces(text.slice(0, m.index) + alt.trim() + text.slice(m.index + m[0].length)));
}

/** A tox env name's Python: py38 -> 3.8, py3.11 -> 3.11, py311-lint -> 3.11. */
function envPython(name: string): string | undefined {
  const m = /(?:^|-)py(3)\.?(\d{1,2})(?:-|$)/.exec(name);
  return m ? `${m[1]}.${m[2]}` : undefined;
}

/** `py38,{py39,py310}` -> python_version == "3.8" or ...; undefined when any factor is not a Python or is negated. */
function pythonMarker(factors: string): string | undefined {
  const versions = expandBraces(factors)
    .flatMap((f) => f.split(','))
    .map((f) => f.trim())
    .map((f) => (/^py\d/.test(f) ? envPython(f) : undefined));
  if (!versions.length || versions.some((v) => v === undefined)) return undefined;
  return [...new Set(versions)].map((v) => `python_version == "${v}"`).join(' or ');
}

/** Splits `envlist` values on commas and newlines, outside braces. */
function envNames(value: string): string[] {
  const names: string[] = [];
  let depth = 0;
  let cur = '';
  for (const c of value) {
    if (c === '{') depth++;
    if (c === '}') depth--;
    if ((c === ',' || c === '\n') && depth === 0) {
      names.push(cur.trim());
      cur = '';
    } else cur += c;
  }
  names.push(cur.trim());
  return names.filter(Boolean).flatMap(expandBraces);
}

class ToxIni {
  constructor(
    private readonly ctx: EvidenceContext,
    private readonly file: string,
    private readonly sections: Map<string, IniSection>,
  ) {}

  /** A key's lines with `{[section]key}` references replaced by that key's lines. */
  lines(section: string, key: string, depth = 0): Line[] {
    const value = this.sections.get(section)?.keys.get(key);
    if (!value || depth > 8) return [];
    return value.lines.flatMap((l) => {
      const ref = /^\{\[([^\]]+)\]([\w-]+)\}$/.exec(l.text);
      if (ref) return this.lines(ref[1], ref[2], depth + 1);
      const text = l.text.replace(/\{\[([^\]]+)\]([\w-]+)\}/g, (_, s: string, k: string) =>
        this.lines(s, k, depth + 1)
          .map((x) => x.text)
          .join(' '),
      );
      return [{ text: text.replace(/\{toxinidir\}\/?/g, '').replace(/\s+#.*$/, ''), line: l.line }];
    });
  }

  /** `py38,py39: pkg` -> pkg, with the factor condition as written. */
  private withoutFactors(text: string): { text: string; factors?: string } {
    const m = /^([!\w{},.-]+(?:\s*,\s*[!\w{},.-]+)*):\s+(.*)$/.exec(text);
    return m ? { text: m[2], factors: m[1] } : { text };
  }

  /**
   * A deps line's requirements. An env named for a Python (py38) or a condition on Python
   * factors (`py38,py39:`) becomes a marker: those deps hold on those Pythons only. A condition
   * on other factors (`django32:`, `!py38:`) is an env variant: kept, as an extra.
   */
  private deps(section: string, group: Group, scope: string, envMarker?: string): void {
    for (const l of this.lines(section, 'deps')) {
      const { text, factors } = this.withoutFactors(l.text);
      const source: Source = { file: this.file, line: l.line };
      const factorMarker = factors ? pythonMarker(factors) : undefined;
      const variant = factors !== undefined && factorMarker === undefined;
      const markers = [envMarker, factorMarker].filter((m): m is string => m !== undefined);
      const entries = requirementsLine(text, source, (f) => this.ctx.checkout.read(f)).map((e) =>
        e.kind === 'requirement' && markers.length ? { ...e, requirement: withMarker(e.requirement, markers.join(' and ')) } : e,
      );
      this.ctx.addEntries(entries, variant ? 'extra' : group, factors ? `${scope} (${factors})` : scope);
    }
  }

  private env(section: string, name: string, scope: string): void {
    const ev = this.ctx.evidence;
    // An env without its own commands runs [testenv]'s (tox's inheritance); they are recorded once, there.
    const own = this.sections.get(section)?.keys.has('commands') ?? false;
    const commands = this.lines(own ? section : 'testenv', 'commands').flatMap((l) => {
      const words = shellSplit(l.text.replace(/^-\s*/, '')).flatMap((w) => {
        const posargs = /^\{posargs(?::(.*))?\}$/.exec(w);
        return posargs ? shellSplit(posargs[1] ?? '') : [w];
      });
      const args = argsAfterPytest(words);
      return args ? [{ args, line: l.line }] : [];
    });
    if (own) for (const c of commands) ev.testCommands.push({ tool: 'tox', scope, args: c.args, source: { file: this.file, line: c.line } });
    const group: Group = commands.length || (!own && section === 'testenv') ? 'test' : groupOfName(name, 'dev');
    const python = envPython(name);
    this.deps(section, group, scope, python ? `python_version == "${python}"` : undefined);
    const extras = this.lines(section, 'extras').flatMap((l) =>
      l.text
        .split(/[,\s]+/)
        .filter(Boolean)
        .map((e) => ({ extra: normalizeName(e), line: l.line })),
    );
    if (extras.length) ev.selfInstalls.push({ extras: extras.map((e) => e.extra), group, source: { file: this.file, line: extras[0].line } });
    for (const l of this.lines(section, 'setenv')) {
      const kv = /^([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.*)$/.exec(l.text);
      if (kv) ev.vars.push({ name: kv[1], value: kv[2], scope, source: { file: this.file, line: l.line } });
    }
    for (const l of this.lines(section, 'basepython')) {
      const version = /^python(3\.\d+)$/.exec(l.text)?.[1];
      if (version) ev.pythonVersions.push({ version, from: 'tox', source: { file: this.file, line: l.line } });
    }
  }

  read(toxSection: string): void {
    for (const l of this.lines(toxSection, 'envlist')) {
      for (const name of envNames(l.text)) {
        const version = envPython(name);
        if (version) this.ctx.evidence.pythonVersions.push({ version, from: 'tox', source: { file: this.file, line: l.line } });
      }
    }
    for (const section of this.sections.keys()) {
      if (section !== 'testenv' && !section.startsWith('testenv:')) continue;
      const name = section === 'testenv' ? 'testenv' : section.slice('testenv:'.length);
      this.env(section, name, `tox:${name}`);
    }
  }
}

/** The tox configuration in `text` (all of a tox.ini, or a TOML string starting at `firstLine` of `file`). */
export function readToxIni(ctx: EvidenceContext, file: string, text: string, firstLine = 1): void {
  const sections = parseIni(text, firstLine);
  new ToxIni(ctx, file, sections).read(file === 'setup.cfg' ? 'tox:tox' : 'tox');
}
