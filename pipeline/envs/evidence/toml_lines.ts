/**
 * Where a value of a parsed TOML file is written: the TOML parser keeps no positions, so the line
 * of `[project.optional-dependencies] test = ["pytest>=7"]`'s "pytest>=7" is found in the text:
 * from the nearest table header of the path, through the keys below it, to the literal itself.
 */
import { parse } from 'smol-toml';

const regexpText = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/** `a."b.c".d` -> ['a', 'b.c', 'd']. */
function dottedKey(text: string): string[] {
  return [...text.matchAll(/\s*(?:"([^"]*)"|'([^']*)'|([A-Za-z0-9_-]+))\s*(?:\.|$)/g)].map((m) => m[1] ?? m[2] ?? m[3]);
}

export class TomlLines {
  private readonly lines: string[];
  /** Table headers ([a.b] and [[a.b]]) in order, with 1-based lines. */
  private readonly headers: { path: string[]; line: number }[] = [];

  constructor(text: string) {
    this.lines = text.split(/\r?\n/);
    this.lines.forEach((l, i) => {
      const m = /^\s*\[\[?([^\]]+)\]\]?\s*(?:#.*)?$/.exec(l);
      if (m) this.headers.push({ path: dottedKey(m[1]), line: i + 1 });
    });
  }

  /** 1-based line of `value` (a string, as a quoted literal) or else of the last key of `path`, or of the nearest table header. */
  find(path: string[], value?: string): number {
    let best = -1;
    this.headers.forEach((h, i) => {
      if (h.path.length <= path.length && h.path.every((p, j) => p === path[j]) && (best < 0 || h.path.length >= this.headers[best].path.length)) best = i;
    });
    let start = best >= 0 ? this.headers[best].line : 1;
    const end = best >= 0 && best + 1 < this.headers.length ? this.headers[best + 1].line : this.lines.length + 1;
    for (const key of path.slice(best >= 0 ? this.headers[best].path.length : 0)) {
      const re = new RegExp(`(^|[\\s{,])("${regexpText(key)}"|'${regexpText(key)}'|${regexpText(key)})\\s*=`);
      for (let n = start; n < end; n++) {
        if (re.test(this.lines[n - 1])) {
          start = n;
          break;
        }
      }
    }
    if (value !== undefined) {
      const quoted = new RegExp(`"${regexpText(value)}"|'${regexpText(value)}'`);
      for (let n = start; n < end; n++) if (quoted.test(this.lines[n - 1])) return n;
    }
    return start;
  }
}

export type TomlTable = Record<string, unknown>;

/** The parsed document, or the parser's message. */
export function parseToml(text: string): { table: TomlTable } | { error: string } {
  try {
    return { table: parse(text) as TomlTable };
  } catch (e) {
    return { error: (e as Error).message.split('\n')[0] };
  }
}

/** `table[a][b]...` when every step is a table, else undefined. */
export function tableAt(root: TomlTable, ...path: string[]): TomlTable | undefined {
  let cur: unknown = root;
  for (const p of path) {
    if (!cur || typeof cur !== 'object' || Array.isArray(cur) || !Object.hasOwn(cur as object, p)) return undefined;
    cur = (cur as TomlTable)[p];
  }
  return cur && typeof cur === 'object' && !Array.isArray(cur) ? (cur as TomlTable) : undefined;
}

/** The strings of a TOML array (other items dropped), or [] when it is not one. */
export function strings(value: unknown): string[] {
  return Array.isArray(value) ? value.filter((v): v is string => typeof v === 'string') : typeof value === 'string' ? [value] : [];
}
