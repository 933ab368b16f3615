/**
 * Pipfile (pipenv): [packages] are the runtime requirements, [dev-packages] the developer's (tests
 * among them), [requires] python_version the Python. A value is "*", a PEP 440 specifier, or a
 * table with version, extras, markers (a git or path source keeps only the name).
 */
import type { EvidenceContext, Group } from './context.js';
import { parseToml, strings, TomlLines, type TomlTable, tableAt } from './toml_lines.js';

const FILE = 'Pipfile';

export function readPipfile(ctx: EvidenceContext): void {
  const text = ctx.checkout.read(FILE);
  if (text === undefined) return;
  const parsed = parseToml(text);
  if ('error' in parsed) {
    ctx.note({ file: FILE, line: 1 }, `not read: ${parsed.error}`);
    return;
  }
  const lines = new TomlLines(text);
  const sections: [string, Group][] = [
    ['packages', 'runtime'],
    ['dev-packages', 'dev'],
  ];
  for (const [section, group] of sections) {
    for (const [name, spec] of Object.entries(tableAt(parsed.table, section) ?? {})) {
      const table: TomlTable = spec && typeof spec === 'object' ? (spec as TomlTable) : { version: spec };
      const version = typeof table.version === 'string' && table.version !== '*' ? table.version : '';
      const extras = strings(table.extras);
      const marker = typeof table.markers === 'string' ? ` ; ${table.markers}` : '';
      ctx.addRequirement(`${name}${extras.length ? `[${extras.join(',')}]` : ''}${version}${marker}`, { file: FILE, line: lines.find([section, name]) }, group);
    }
  }
  const requires = tableAt(parsed.table, 'requires');
  for (const key of ['python_version', 'python_full_version']) {
    const version = /^(3\.\d+)/.exec(String(requires?.[key] ?? ''))?.[1];
    if (version) ctx.evidence.pythonVersions.push({ version, from: 'pipfile', source: { file: FILE, line: lines.find(['requires', key]) } });
  }
}
