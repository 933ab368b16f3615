/**
 * pyproject.toml: PEP 621 `[project]` (dependencies, optional-dependencies, requires-python,
 * classifiers, version), PEP 517 `[build-system]`, PEP 735 `[dependency-groups]` (with
 * include-group), and the tools' own tables: poetry, hatch (envs, version source, vcs hook), pdm,
 * setuptools (dynamic files), setuptools-scm, flit's old metadata, tox's legacy_tox_ini.
 */
import { shellSplit } from '../../../core/shell.js';
import { normalizeName } from '../requirements/names.js';
import { parseSpecifiers } from '../requirements/pep440.js';
import { poetryToPep440 } from '../requirements/poetry.js';
import { type EvidenceContext, type Group, groupOfName, type Source } from './context.js';
import { argsAfterPytest } from './pytest_invocation.js';
import { parseToml, strings, TomlLines, type TomlTable, tableAt } from './toml_lines.js';
import { readToxIni } from './tox.js';

/** Build requirements that compile a project's own extensions: its build needs gcc and Python's headers. */
const COMPILING = new Set(['cython', 'pybind11', 'nanobind', 'scikit-build', 'scikit-build-core', 'meson-python', 'cmake']);

const FILE = 'pyproject.toml';

/** "Programming Language :: Python :: 3.11" -> 3.11. */
export function classifierPython(classifier: string): string | undefined {
  return /^Programming Language :: Python :: (\d+\.\d+)$/.exec(classifier.trim())?.[1];
}

class Pyproject {
  constructor(
    private readonly ctx: EvidenceContext,
    readonly table: TomlTable,
    readonly lines: TomlLines,
  ) {}

  source(path: string[], value?: string): Source {
    return { file: FILE, line: this.lines.find(path, value) };
  }

  list(path: string[], value: unknown, group: Group, scope?: string): void {
    for (const s of strings(value)) this.ctx.addRequirement(s, this.source(path, s), group, scope);
  }

  project(): void {
    const ev = this.ctx.evidence;
    const build = tableAt(this.table, 'build-system');
    if (build) {
      this.list(['build-system', 'requires'], build.requires, 'build');
      if (typeof build['build-backend'] === 'string') ev.project.buildBackend = build['build-backend'];
    }
    const project = tableAt(this.table, 'project');
    if (!project) return;
    if (typeof project.name === 'string') ev.project.name = project.name;
    if (typeof project.version === 'string') ev.project.version.static = project.version;
    this.list(['project', 'dependencies'], project.dependencies, 'runtime');
    for (const [extra, list] of Object.entries(tableAt(project, 'optional-dependencies') ?? {})) {
      this.list(['project', 'optional-dependencies', extra], list, groupOfName(extra), `extra:${normalizeName(extra)}`);
    }
    if (typeof project['requires-python'] === 'string') {
      ev.requiresPython.push({ specifier: project['requires-python'], source: this.source(['project', 'requires-python']) });
    }
    for (const c of strings(project.classifiers)) {
      const version = classifierPython(c);
      if (version) ev.pythonVersions.push({ version, from: 'classifier', source: this.source(['project', 'classifiers'], c) });
    }
  }

  /** PEP 735: each group's strings, and the groups it includes (their own lines). */
  dependencyGroups(): void {
    const groups = tableAt(this.table, 'dependency-groups');
    if (!groups) return;
    const byName = new Map(Object.keys(groups).map((k) => [normalizeName(k), k]));
    const expand = (name: string, seen: Set<string>): [string, Source][] => {
      const key = byName.get(normalizeName(name));
      const items = key === undefined ? [] : groups[key];
      if (!Array.isArray(items)) return [];
      return items.flatMap((item): [string, Source][] => {
        if (typeof item === 'string') return [[item, this.source(['dependency-groups', key!], item)]];
        const include = item && typeof item === 'object' ? (item as TomlTable)['include-group'] : undefined;
        if (typeof include !== 'string' || seen.has(normalizeName(include))) return [];
        return expand(include, new Set([...seen, normalizeName(include)]));
      });
    };
    for (const name of Object.keys(groups)) {
      for (const [text, source] of expand(name, new Set([normalizeName(name)])))
        this.ctx.addRequirement(text, source, groupOfName(name), `group:${normalizeName(name)}`);
    }
  }

  /** One `name = constraint | {version, extras, markers, python, optional, git...}` entry of a poetry dependencies table. */
  private poetryDependency(path: string[], name: string, spec: unknown, group: Group, scope?: string): void {
    const source = this.source([...path, name]);
    for (const one of Array.isArray(spec) ? spec : [spec]) {
      const table: TomlTable = one && typeof one === 'object' ? (one as TomlTable) : { version: one };
      const version = typeof table.version === 'string' ? poetryToPep440(table.version) : '';
      if (version === undefined) this.ctx.note(source, `poetry constraint ${JSON.stringify(table.version)} is a union; taken without bounds`);
      const extras = strings(table.extras);
      const markers: string[] = typeof table.markers === 'string' ? [`(${table.markers})`] : [];
      const python = typeof table.python === 'string' ? poetryToPep440(table.python) : undefined;
      if (python) markers.push(...parseSpecifiers(python).map((s) => `python_full_version ${s.op} "${s.version}"`));
      const text = `${name}${extras.length ? `[${extras.join(',')}]` : ''}${version ?? ''}${markers.length ? ` ; ${markers.join(' and ')}` : ''}`;
      this.ctx.addRequirement(text, source, table.optional === true ? 'extra' : group, scope);
    }
  }

  poetry(): void {
    const poetry = tableAt(this.table, 'tool', 'poetry');
    if (!poetry) return;
    const ev = this.ctx.evidence;
    if (typeof poetry.name === 'string') ev.project.name ??= poetry.name;
    if (typeof poetry.version === 'string') ev.project.version.static ??= poetry.version;
    const tables: [string[], Group][] = [
      [['dependencies'], 'runtime'],
      [['dev-dependencies'], 'dev'],
    ];
    for (const name of Object.keys(tableAt(poetry, 'group') ?? {})) tables.push([['group', name, 'dependencies'], groupOfName(name, 'dev')]);
    for (const [sub, group] of tables) {
      const path = ['tool', 'poetry', ...sub];
      for (const [name, spec] of Object.entries(tableAt(this.table, ...path) ?? {})) {
        if (name === 'python' && typeof spec === 'string') {
          const specifier = poetryToPep440(spec);
          if (specifier) ev.requiresPython.push({ specifier, source: this.source([...path, name]) });
        } else this.poetryDependency(path, name, spec, group, sub[0] === 'group' ? `poetry:${sub[1]}` : undefined);
      }
    }
  }

  hatch(): void {
    const hatch = tableAt(this.table, 'tool', 'hatch');
    if (!hatch) return;
    const ev = this.ctx.evidence;
    for (const [env, cfg] of Object.entries(tableAt(hatch, 'envs') ?? {})) {
      if (!cfg || typeof cfg !== 'object') continue;
      const table = cfg as TomlTable;
      const path = ['tool', 'hatch', 'envs', env];
      let runsPytest = false;
      for (const [script, command] of Object.entries(tableAt(table, 'scripts') ?? {})) {
        for (const line of strings(command)) {
          // hatch's {args} are the command line's, {args:tests} with a default.
          const words = shellSplit(line).flatMap((w) => {
            const args = /^\{args(?::(.*))?\}$/.exec(w);
            return args ? shellSplit(args[1] ?? '') : [w];
          });
          const args = argsAfterPytest(words);
          if (!args) continue;
          runsPytest = true;
          ev.testCommands.push({ tool: 'hatch', scope: `hatch:${env}:${script}`, args, source: this.source([...path, 'scripts', script]) });
        }
      }
      const group: Group = runsPytest || env === 'hatch-test' ? 'test' : env === 'default' ? 'dev' : groupOfName(env, 'dev');
      this.list([...path, 'dependencies'], table.dependencies, group, `hatch:${env}`);
      this.list([...path, 'extra-dependencies'], table['extra-dependencies'], group, `hatch:${env}`);
      const features = strings(table.features).map(normalizeName);
      if (features.length) ev.selfInstalls.push({ extras: features, group, source: this.source([...path, 'features']) });
      for (const [name, value] of Object.entries(tableAt(table, 'env-vars') ?? {})) {
        if (typeof value === 'string') ev.vars.push({ name, value, scope: `hatch:${env}`, source: this.source([...path, 'env-vars', name]) });
      }
    }
    if (tableAt(hatch, 'version')?.source === 'vcs') ev.project.version.scm = 'hatch-vcs';
    const hook = tableAt(hatch, 'build', 'hooks', 'vcs')?.['version-file'];
    if (typeof hook === 'string')
      ev.project.version.files.push({ path: hook, source: this.source(['tool', 'hatch', 'build', 'hooks', 'vcs', 'version-file']) });
  }

  pdm(): void {
    const pdm = tableAt(this.table, 'tool', 'pdm');
    if (!pdm) return;
    for (const [name, list] of Object.entries(tableAt(pdm, 'dev-dependencies') ?? {})) {
      this.list(['tool', 'pdm', 'dev-dependencies', name], list, groupOfName(name, 'dev'), `pdm:${normalizeName(name)}`);
    }
    const version = tableAt(pdm, 'version');
    if (version?.source === 'scm') {
      this.ctx.evidence.project.version.scm = 'pdm-backend';
      if (typeof version.write_to === 'string')
        this.ctx.evidence.project.version.files.push({ path: version.write_to, source: this.source(['tool', 'pdm', 'version', 'write_to']) });
    }
  }

  setuptools(): void {
    const ev = this.ctx.evidence;
    const scm = tableAt(this.table, 'tool', 'setuptools_scm');
    const buildRequires = strings(tableAt(this.table, 'build-system')?.requires).map((r) => normalizeName(r.split(/[^A-Za-z0-9._-]/)[0]));
    if (scm || buildRequires.includes('setuptools-scm')) ev.project.version.scm ??= 'setuptools-scm';
    // A backend or build requirement that exists to compile (or setuptools' own ext-modules table).
    const compiles = buildRequires.find((r) => COMPILING.has(r));
    if (compiles) ev.project.compiled ??= this.source(['build-system', 'requires'], compiles);
    if (tableAt(this.table, 'tool', 'setuptools')?.['ext-modules']) ev.project.compiled ??= this.source(['tool', 'setuptools', 'ext-modules']);
    for (const key of ['write_to', 'version_file']) {
      if (typeof scm?.[key] === 'string') ev.project.version.files.push({ path: scm[key], source: this.source(['tool', 'setuptools_scm', key]) });
    }
    const dynamic = tableAt(this.table, 'tool', 'setuptools', 'dynamic');
    for (const file of strings(tableAt(dynamic ?? {}, 'dependencies')?.file)) this.ctx.addRequirementsFile(file, 'runtime');
    for (const [extra, spec] of Object.entries(tableAt(dynamic ?? {}, 'optional-dependencies') ?? {})) {
      const files = spec && typeof spec === 'object' ? strings((spec as TomlTable).file) : [];
      for (const file of files) this.ctx.addRequirementsFile(file, groupOfName(extra), `extra:${normalizeName(extra)}`);
    }
  }

  /** flit before PEP 621: [tool.flit.metadata] requires, requires-extra, requires-python. */
  flit(): void {
    const meta = tableAt(this.table, 'tool', 'flit', 'metadata');
    if (!meta) return;
    const path = ['tool', 'flit', 'metadata'];
    this.list([...path, 'requires'], meta.requires, 'runtime');
    for (const [extra, list] of Object.entries(tableAt(meta, 'requires-extra') ?? {}))
      this.list([...path, 'requires-extra', extra], list, groupOfName(extra), `extra:${normalizeName(extra)}`);
    if (typeof meta['requires-python'] === 'string')
      this.ctx.evidence.requiresPython.push({ specifier: meta['requires-python'], source: this.source([...path, 'requires-python']) });
  }

  tox(): void {
    const ini = tableAt(this.table, 'tool', 'tox')?.legacy_tox_ini;
    if (typeof ini === 'string') readToxIni(this.ctx, FILE, ini, this.lines.find(['tool', 'tox', 'legacy_tox_ini']) + 1);
  }
}

/** The parsed pyproject.toml (for the pytest config reader), or undefined when absent or not TOML (a note says why). */
export function readPyproject(ctx: EvidenceContext): { table: TomlTable; lines: TomlLines } | undefined {
  const text = ctx.checkout.read(FILE);
  if (text === undefined) return undefined;
  const parsed = parseToml(text);
  if ('error' in parsed) {
    ctx.note({ file: FILE, line: 1 }, `not read: ${parsed.error}`);
    return undefined;
  }
  const py = new Pyproject(ctx, parsed.table, new TomlLines(text));
  py.project();
  py.dependencyGroups();
  py.poetry();
  py.hatch();
  py.pdm();
  py.setuptools();
  py.flit();
  py.tox();
  return { table: py.table, lines: py.lines };
}
