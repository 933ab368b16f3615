import { terminalSafe } from './terminal.js';

/** Left-aligned text table; the first row is the header. A cell is one line: control characters in it are escaped. */
export function table(rows: (string | number)[][]): string {
  const cells = rows.map((r) => r.map((cell) => terminalSafe(String(cell ?? ''))));
  const widths = cells[0].map((_, c) => Math.max(...cells.map((r) => (r[c] ?? '').length)));
  return cells
    .map((r) =>
      r
        .map((cell, c) => cell.padEnd(widths[c]))
        .join('  ')
        .trimEnd(),
    )
    .join('\n');
}
