/**
 * INI files as Python's configparser reads them (setup.cfg, tox.ini, pytest.ini): `[section]`
 * headers, `key = value` or `key: value`, indented continuation lines, full-line `#`/`;` comments.
 * Keys are lowercased as configparser does; every value keeps the line of each of its lines.
 */

export interface IniValue {
  /** The value's lines joined with "\n", as configparser returns it. */
  value: string;
  /** The key's line. */
  line: number;
  /** Each non-empty line of the value (the key line's remainder first), with its 1-based line. */
  lines: { text: string; line: number }[];
}

export interface IniSection {
  line: number;
  keys: Map<string, IniValue>;
}

/** Sections by name; `firstLine` is the line number of the text's first line (a TOML string's INI starts later in its file). */
export function parseIni(text: string, firstLine = 1): Map<string, IniSection> {
  const sections = new Map<string, IniSection>();
  let section: IniSection | undefined;
  let current: IniValue | undefined;
  text.split(/\r?\n/).forEach((raw, i) => {
    const line = firstLine + i;
    const stripped = raw.trim();
    if (!stripped || stripped.startsWith('#') || stripped.startsWith(';')) return;
    if (current && /^\s/.test(raw)) {
      current.lines.push({ text: stripped, line });
      current.value += `\n${stripped}`;
      return;
    }
    const header = /^\[([^\]]+)\]/.exec(stripped);
    if (header) {
      const name = header[1].trim();
      section = sections.get(name) ?? { line, keys: new Map() };
      sections.set(name, section);
      current = undefined;
      return;
    }
    const kv = /^([^=:]+?)\s*[=:]\s*(.*)$/.exec(stripped);
    if (!section || !kv) {
      current = undefined;
      return;
    }
    current = { value: kv[2], line, lines: kv[2] ? [{ text: kv[2], line }] : [] };
    section.keys.set(kv[1].toLowerCase(), current);
  });
  return sections;
}
