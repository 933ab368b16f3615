/**
 * setuptools' two places: setup.cfg ([metadata], [options] install_requires / python_requires /
 * setup_requires / tests_require, [options.extras_require], [tox:tox]) and setup.py, parsed and
 * never run: the `setup(...)` call's keyword arguments where they are literals, names assigned
 * literals, or requirement files they read (python_source.ts says how far that goes).
 */

import { normalizeName } from '../requirements/names.js';
import { type EvidenceContext, type Group, groupOfName, type Source } from './context.js';
import { parseIni } from './ini.js';
import { classifierPython } from './pyproject.js';
import { type Node, PythonSource, type Value } from './python_source.js';
import { readToxIni } from './tox.js';

/** An extras_require key: "test", or "test:python_version<'3.8'" / ":sys_platform=='win32'" (a marker on every item). */
function extraKey(key: string): { extra: string; group: Group; marker?: string } {
  const cut = key.indexOf(':');
  const extra = normalizeName(cut < 0 ? key : key.slice(0, cut));
  const marker = cut < 0 ? undefined : key.slice(cut + 1).trim();
  return { extra, group: extra ? groupOfName(extra) : 'runtime', ...(marker ? { marker } : {}) };
}

function withMarker(text: string, marker?: string): string {
  if (!marker) return text;
  return text.includes(';') ? `${text} and (${marker})` : `${text} ; ${marker}`;
}

/** One requirement a line (inline `#` comments off); `file: a.txt, b.txt` names requirement files. */
function addLines(ctx: EvidenceContext, lines: { text: string; line: number }[], file: string, group: Group, scope?: string, marker?: string): void {
  for (const l of lines) {
    const text = l.text.replace(/\s+#.*$/, '').trim();
    if (!text || text.startsWith('#')) continue;
    const files = /^file:\s*(.*)$/.exec(text);
    if (files) for (const f of files[1].split(',')) ctx.addRequirementsFile(f.trim(), group, scope);
    else ctx.addRequirement(withMarker(text, marker), { file, line: l.line }, group, scope);
  }
}

export function readSetupCfg(ctx: EvidenceContext): void {
  const file = 'setup.cfg';
  const text = ctx.checkout.read(file);
  if (text === undefined) return;
  const ev = ctx.evidence;
  const sections = parseIni(text);
  const metadata = sections.get('metadata')?.keys;
  const options = sections.get('options')?.keys;
  const name = metadata?.get('name')?.value;
  if (name) ev.project.name ??= name;
  const version = metadata?.get('version')?.value;
  if (version && !/^(attr|file):/.test(version)) ev.project.version.static ??= version;
  for (const l of metadata?.get('classifiers')?.lines ?? []) {
    const python = classifierPython(l.text);
    if (python) ev.pythonVersions.push({ version: python, from: 'classifier', source: { file, line: l.line } });
  }
  const lists: [string, Group][] = [
    ['install_requires', 'runtime'],
    ['tests_require', 'test'],
    ['setup_requires', 'build'],
  ];
  for (const [key, group] of lists) addLines(ctx, options?.get(key)?.lines ?? [], file, group);
  const requiresPython = options?.get('python_requires');
  if (requiresPython?.value) ev.requiresPython.push({ specifier: requiresPython.value.trim(), source: { file, line: requiresPython.line } });
  for (const [key, value] of sections.get('options.extras_require')?.keys ?? []) {
    const { extra, group, marker } = extraKey(key);
    addLines(ctx, value.lines, file, group, extra ? `extra:${extra}` : undefined, marker);
  }
  if (sections.has('tox:tox')) readToxIni(ctx, file, text);
}

/** Build programs a setup.py may run that the base must then have: a CMake extension runs cmake, then make or ninja. */
const BUILD_PROGRAMS = new Set(['cmake', 'ninja', 'make']);
const RUNS_PROGRAM = /(^|\.)(check_call|check_output|run|call|Popen)$/;

/** The program a command names first: `["cmake", src] + args` or `"cmake --build ."`. */
function programOf(node: Node | undefined): string | undefined {
  if (node?.k === 'list') return node.items[0]?.k === 'str' ? node.items[0].v : undefined;
  if (node?.k === 'binop' && node.op === '+') return programOf(node.l);
  if (node?.k === 'str' && !node.dynamic) return node.v.trim().split(/\s+/)[0];
  return undefined;
}

class SetupPy {
  static readonly FILE = 'setup.py';

  constructor(private readonly ctx: EvidenceContext) {}

  private source(line: number): Source {
    return { file: SetupPy.FILE, line };
  }

  /** Requirements in a value: strings (one a line), lists of them, files they read. */
  requirements(value: Value, what: string, group: Group, scope?: string, marker?: string): void {
    if (value.t === 'str') {
      const lines = value.v.split('\n').map((text, i) => ({ text, line: value.line + i }));
      addLines(this.ctx, lines, SetupPy.FILE, group, scope, marker);
    } else if (value.t === 'list') for (const item of value.items) this.requirements(item, what, group, scope, marker);
    else if (value.t === 'file') this.ctx.addRequirementsFile(value.path, group, scope);
    else this.ctx.note(this.source(value.line), `${what} is not read: ${value.t === 'unknown' ? value.why : `a ${value.t}`}`);
  }

  read(text: string): void {
    const src = new PythonSource(text);
    // An extension module built from sources (nnsight's `_c/py_mount.c`): the build needs a compiler.
    const [extension] = src.calls((c) => /(^|\.)(Extension|Pybind11Extension|CppExtension|cythonize)$/.test(c));
    if (extension) this.ctx.evidence.project.compiled ??= this.source(extension.line);
    // tensordict's CMakeExtension runs `cmake` from its build_ext: without it the extension is not built.
    const project = this.ctx.evidence.project;
    for (const run of src.calls((c) => RUNS_PROGRAM.test(c))) {
      const name = programOf(run.args[0]);
      if (!name || !BUILD_PROGRAMS.has(name) || project.programs?.some((p) => p.name === name)) continue;
      project.programs = [...(project.programs ?? []), { name, source: this.source(run.line) }];
      project.compiled ??= this.source(run.line);
    }
    const [call] = src.calls((c) => c === 'setup' || c.endsWith('.setup'));
    if (!call) return;
    const kwargs = new Map<string, Value>();
    for (const [key, node] of call.kwargs) {
      const value = src.evaluate(node);
      if (key) kwargs.set(key, value);
      else if (value.t === 'dict') for (const [k, v] of value.entries) kwargs.set(k, v);
      else this.ctx.note(this.source(call.line), `setup(**...) is not read: ${value.t === 'unknown' ? value.why : value.t}`);
    }
    const ev = this.ctx.evidence;
    const str = (key: string) => {
      const v = kwargs.get(key);
      return v?.t === 'str' ? v : undefined;
    };
    const name = str('name');
    if (name) ev.project.name ??= name.v;
    const version = str('version');
    if (version) ev.project.version.static ??= version.v;
    const python = str('python_requires');
    if (python) ev.requiresPython.push({ specifier: python.v, source: this.source(python.line) });
    const lists: [string, Group][] = [
      ['install_requires', 'runtime'],
      ['tests_require', 'test'],
      ['setup_requires', 'build'],
    ];
    for (const [key, group] of lists) {
      const value = kwargs.get(key);
      if (value) this.requirements(value, key, group);
    }
    const extras = kwargs.get('extras_require');
    if (extras?.t === 'dict') {
      for (const [key, value] of extras.entries) {
        const { extra, group, marker } = extraKey(key);
        this.requirements(value, `extras_require[${JSON.stringify(key)}]`, group, extra ? `extra:${extra}` : undefined, marker);
      }
    } else if (extras) this.requirements(extras, 'extras_require', 'extra');
    const classifiers = kwargs.get('classifiers');
    for (const item of classifiers?.t === 'list' ? classifiers.items : []) {
      const python = item.t === 'str' ? classifierPython(item.v) : undefined;
      if (python) ev.pythonVersions.push({ version: python, from: 'classifier', source: this.source(item.line) });
    }
    const scm = kwargs.get('use_scm_version');
    if (scm && !(scm.t === 'bool' && !scm.v)) {
      ev.project.version.scm ??= 'setuptools-scm';
      const writeTo = scm.t === 'dict' ? (scm.entries.get('write_to') ?? scm.entries.get('version_file')) : undefined;
      if (writeTo?.t === 'str') ev.project.version.files.push({ path: writeTo.v, source: this.source(writeTo.line) });
    }
  }
}

export function readSetupPy(ctx: EvidenceContext): void {
  const text = ctx.checkout.read(SetupPy.FILE);
  if (text !== undefined) new SetupPy(ctx).read(text);
}
