/**
 * pytest's configuration, from wherever pytest finds it, in pytest's own order: pytest.ini (even
 * without a [pytest] section), .pytest.ini, pyproject.toml ([tool.pytest.ini_options], or pytest 9's
 * native [tool.pytest] table), tox.ini [pytest], setup.cfg [tool:pytest]. Every place found is
 * kept; the first is the one pytest reads.
 */
import { shellSplit } from '../../../core/shell.js';
import type { EvidenceContext, PytestConfig, Source } from './context.js';
import { type IniSection, parseIni } from './ini.js';
import { strings, type TomlLines, type TomlTable, tableAt } from './toml_lines.js';

const KNOWN = new Set(['testpaths', 'addopts', 'required_plugins', 'markers', 'minversion', 'filterwarnings']);

/** An ini value by pytest's type for it: "args" are shell words, "linelist" one item a line, "paths" whitespace-separated. */
function fromText(key: string, text: string): string[] {
  if (key === 'markers' || key === 'filterwarnings')
    return text
      .split('\n')
      .map((l) => l.trim())
      .filter(Boolean);
  if (key === 'testpaths') return text.split(/\s+/).filter(Boolean);
  // pytest splits addopts with shlex.split, where `#` is an ordinary character.
  return shellSplit(text, false);
}

function config(source: Source, format: PytestConfig['format'], values: Map<string, string | string[]>): PytestConfig {
  const list = (key: string) => {
    const v = values.get(key);
    return v === undefined ? [] : typeof v === 'string' ? fromText(key, v) : v;
  };
  const minversion = values.get('minversion');
  return {
    source,
    format,
    testpaths: list('testpaths'),
    addopts: list('addopts'),
    required_plugins: list('required_plugins'),
    markers: list('markers'),
    ...(minversion !== undefined ? { minversion: String(minversion) } : {}),
    filterwarnings: list('filterwarnings'),
    other: Object.fromEntries([...values].filter(([k]) => !KNOWN.has(k))),
  };
}

function fromIni(file: string, section: IniSection | undefined): PytestConfig {
  const values = new Map<string, string>();
  for (const [k, v] of section?.keys ?? []) values.set(k, v.value);
  return config({ file, line: section?.line ?? 1 }, 'ini', values);
}

/** A TOML table's values: arrays of strings as lists, strings as ini text, other scalars as text. */
function fromToml(source: Source, format: PytestConfig['format'], table: TomlTable): PytestConfig {
  const values = new Map<string, string | string[]>();
  for (const [k, v] of Object.entries(table)) {
    if (format === 'toml' && k === 'ini_options') continue;
    if (Array.isArray(v)) values.set(k, strings(v));
    else if (typeof v !== 'object') values.set(k, String(v));
  }
  return config(source, format, values);
}

/** pyproject.toml's tables; a pytest.ini, tox.ini or setup.cfg is read here from the checkout. */
export function readPytestConfigs(ctx: EvidenceContext, pyproject?: { table: TomlTable; lines: TomlLines }): void {
  const found: PytestConfig[] = [];
  for (const file of ['pytest.ini', '.pytest.ini']) {
    const text = ctx.checkout.read(file);
    if (text !== undefined) found.push(fromIni(file, parseIni(text).get('pytest')));
  }
  if (pyproject) {
    const native = tableAt(pyproject.table, 'tool', 'pytest');
    const ini = native && tableAt(native, 'ini_options');
    if (native && Object.keys(native).some((k) => k !== 'ini_options'))
      found.push(fromToml({ file: 'pyproject.toml', line: pyproject.lines.find(['tool', 'pytest']) }, 'toml', native));
    if (ini) found.push(fromToml({ file: 'pyproject.toml', line: pyproject.lines.find(['tool', 'pytest', 'ini_options']) }, 'ini', ini));
  }
  for (const [file, name] of [
    ['tox.ini', 'pytest'],
    ['setup.cfg', 'tool:pytest'],
  ]) {
    const text = ctx.checkout.read(file);
    const section = text === undefined ? undefined : parseIni(text).get(name);
    if (section) found.push(fromIni(file, section));
  }
  ctx.evidence.pytest.push(...found);
}
