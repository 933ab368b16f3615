/**
 * Text that came from a repository (test ids, reasons, messages, names) on its way to a terminal.
 * A parametrize id may hold ANSI or OSC escapes and newlines (pytest escapes ids unless a suite
 * turns that off): printed raw, it clears the screen, sets the window title or prints a fake line
 * of a table. So every command's human output escapes control characters at the point it is
 * printed: C0 and C1 controls and DEL as `\n`, `\r`, `\t`, `\xNN`, the Unicode line separators
 * and bidirectional overrides (which reorder what a reader sees) as `\uNNNN`. The data (Parquet,
 * the ledger) keep the exact bytes. Machine-readable output (`--json`, JSON progress lines) is
 * read by people too, in a terminal or a CI log: `machineJson` escapes in it what JSON.stringify
 * leaves raw (C1 controls such as U+009B, a CSI of its own, DEL, the separators and overrides),
 * as `\uNNNN`, which a JSON reader decodes to the same string.
 */

const NAMED: Record<string, string> = { '\n': '\\n', '\r': '\\r', '\t': '\\t' };

/** Whether code point `c` would act on a terminal (or on how a reader sees the line) rather than print. */
function acts(c: number): boolean {
  return c < 0x20 || (c >= 0x7f && c <= 0x9f) || c === 0x2028 || c === 0x2029 || (c >= 0x202a && c <= 0x202e) || (c >= 0x2066 && c <= 0x2069);
}

/** `value` as JSON (JSON.stringify's `space`) with no character in it that acts on a terminal. */
export function machineJson(value: unknown, space?: number): string {
  // JSON.stringify escapes C0 controls itself; what is left to escape lies at or above DEL.
  return JSON.stringify(value, null, space).replace(
    /[\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g,
    (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`,
  );
}

/**
 * `text` safe to print: every control character escaped; with `lines`, newlines and tabs are kept
 * (a multi-line text whose lines are its own, as a rendered trace's).
 */
export function terminalSafe(text: string, lines = false): string {
  let out = '';
  let start = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (!acts(c) || (lines && (c === 0x0a || c === 0x09))) continue;
    out += text.slice(start, i) + (NAMED[text[i]] ?? (c <= 0xff ? `\\x${c.toString(16).padStart(2, '0')}` : `\\u${c.toString(16).padStart(4, '0')}`));
    start = i + 1;
  }
  return start ? out + text.slice(start) : text;
}

/**
 * A copy of `value` (a report: plain objects, arrays, strings, numbers) with every string made
 * safe: what a human formatter is given, so that no field it prints can hold a line of its own.
 */
export function forTerminal<T>(value: T): T {
  if (typeof value === 'string') return terminalSafe(value) as T;
  if (Array.isArray(value)) return value.map(forTerminal) as T;
  if (value && typeof value === 'object' && Object.getPrototypeOf(value) === Object.prototype) {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, forTerminal(v)])) as T;
  }
  return value;
}
