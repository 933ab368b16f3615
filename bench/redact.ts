/**
 * `npm run bench:redact -- OUT`: how fast redaction is, and what it finds, on the rows an output
 * folder's part files hold (real traces and tests, e.g. the Debian corpus run). For each config it
 * reads every row once to time JSON parsing alone, then again with redaction, and prints rows/s,
 * the ratio of the two and the placeholders written by kind. `--show N` prints N findings per kind
 * with their context, to judge them by eye: on real code nobody planted secrets in, every finding
 * is a false positive unless its context says otherwise.
 *
 *   node dist/bench/redact.js OUT [--show 10] [--limit ROWS]
 */
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { readLines } from '../core/jsonl.js';
import { table } from '../core/table.js';
import { Redactor } from '../datasets/redact.js';
import { SecretScanner } from '../datasets/secrets.js';

const args = process.argv.slice(2);
const out = args.find((a) => !a.startsWith('--'));
if (!out) throw new Error('usage: node dist/bench/redact.js OUT [--show N] [--limit ROWS]');
const flag = (name: string, dflt: number) => {
  const i = args.indexOf(name);
  return i >= 0 ? Number(args[i + 1]) : dflt;
};
const show = flag('--show', 0);
const limit = flag('--limit', Number.POSITIVE_INFINITY);

function* partLines(config: string): Generator<string> {
  const dir = join(out as string, 'parts', config);
  let n = 0;
  for (const f of readdirSync(dir).sort()) {
    for (const line of readLines(join(dir, f))) {
      if (n++ >= limit) return;
      yield line;
    }
  }
}

/** Every string of a value, for showing findings in context. */
function* strings(v: unknown): Generator<string> {
  if (typeof v === 'string') yield v;
  else if (Array.isArray(v)) for (const x of v) yield* strings(x);
  else if (v && typeof v === 'object') for (const x of Object.values(v)) yield* strings(x);
}

const rows: (string | number)[][] = [['config', 'rows', 'MB', 'parse rows/s', 'parse+redact rows/s', 'ratio', 'rows redacted', 'placeholders']];
const scanner = new SecretScanner();
for (const config of ['tests', 'traces']) {
  let bytes = 0;
  let n = 0;
  let t = performance.now();
  for (const line of partLines(config)) {
    JSON.parse(line);
    bytes += line.length;
    n++;
  }
  const parseS = (performance.now() - t) / 1000;
  const redactor = new Redactor();
  t = performance.now();
  for (const line of partLines(config)) redactor.row(config, JSON.parse(line) as Record<string, unknown>);
  const redactS = (performance.now() - t) / 1000;
  const s = redactor.summary().by_config[config] ?? { rows_redacted: 0, by_kind: {} };
  rows.push([
    config,
    n,
    (bytes / 1e6).toFixed(1),
    Math.round(n / parseS),
    Math.round(n / redactS),
    (redactS / parseS).toFixed(2),
    s.rows_redacted,
    Object.entries(s.by_kind)
      .map(([k, c]) => `${k} ${c}`)
      .join(', ') || 'none',
  ]);
  if (show > 0) {
    // Distinct findings with context (traces repeat the same source line in many episodes).
    const seen = new Map<string, Set<string>>();
    for (const line of partLines(config)) {
      const row = JSON.parse(line) as Record<string, unknown>;
      for (const text of strings(config === 'traces' ? { ...row, text: '' } : row)) {
        for (const f of scanner.findings(text)) {
          const shown = seen.get(f.kind) ?? new Set<string>();
          seen.set(f.kind, shown);
          const ctx = `${text.slice(Math.max(0, f.start - 30), f.start)}[[${text.slice(f.start, f.end)}]]${text.slice(f.end, f.end + 30)}`.replace(
            /\n/g,
            '\\n',
          );
          if (shown.size < show) shown.add(ctx);
        }
      }
    }
    for (const [kind, ctxs] of seen) for (const c of ctxs) process.stdout.write(`${config} ${kind}: ${c}\n`);
  }
}
process.stdout.write(`${table(rows)}\n`);
