/** Left-aligned text table; the first row is the header. */
export function table(rows: (string | number)[][]): string {
  const widths = rows[0].map((_, c) => Math.max(...rows.map((r) => String(r[c] ?? '').length)));
  return rows
    .map((r) =>
      r
        .map((cell, c) => String(cell ?? '').padEnd(widths[c]))
        .join('  ')
        .trimEnd(),
    )
    .join('\n');
}
