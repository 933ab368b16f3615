/**
 * Benchmark decontamination of programs by token n-gram overlap, as the GPT-3 and Llama reports
 * did for their evaluation sets: a program whose n-grams mostly occur in a benchmark's solutions
 * is a copy of one, whatever its whitespace and comments. The benchmark file is JSON Lines (every
 * string of every record is a document, named by its `task_id`, `id` or `name`, else its line) or
 * plain text (one document).
 */
import { readFileSync } from 'node:fs';

/** 13-grams: the length GPT-3's and Llama's contamination checks used. */
export const DEFAULT_NGRAM = 13;
/** A program is contaminated when at least this share of its n-grams is in the benchmark. */
export const DEFAULT_OVERLAP_THRESHOLD = 0.5;

const TOKEN = /[A-Za-z_][A-Za-z0-9_]*|\d+(?:\.\d+)?|[^\s\w]/g;

/** Python tokens with comments and layout dropped (a `#` inside a string ends the line early: a rare miss, never a false match). */
export function codeTokens(source: string): string[] {
  return source.replace(/#[^\n]*/g, '').match(TOKEN) ?? [];
}

function ngrams(tokens: string[], n: number): string[] {
  const out: string[] = [];
  for (let i = 0; i + n <= tokens.length; i++) out.push(tokens.slice(i, i + n).join('\u0001'));
  return out;
}

function* strings(v: unknown): Generator<string> {
  if (typeof v === 'string') yield v;
  else if (Array.isArray(v)) for (const x of v) yield* strings(x);
  else if (v && typeof v === 'object') for (const x of Object.values(v)) yield* strings(x);
}

export interface Overlap {
  /** Share of the program's n-grams found in the benchmark (0 for a program shorter than n tokens). */
  overlap: number;
  ngrams: number;
  /** The document sharing the most n-grams with the program. */
  document: string | null;
  contaminated: boolean;
}

export class BenchmarkNgrams {
  /** n-gram to the first document it occurs in. */
  private readonly index = new Map<string, string>();
  readonly documents: number;

  constructor(
    readonly file: string,
    readonly n = DEFAULT_NGRAM,
    readonly threshold = DEFAULT_OVERLAP_THRESHOLD,
  ) {
    const text = readFileSync(file, 'utf8');
    const docs: [string, string][] = [];
    if (/\.jsonl?$/i.test(file)) {
      text.split('\n').forEach((line, i) => {
        if (!line.trim()) return;
        let rec: Record<string, unknown>;
        try {
          rec = JSON.parse(line) as Record<string, unknown>;
        } catch (e) {
          throw new Error(`${file}:${i + 1}: not JSON (${(e as Error).message})`);
        }
        const name = String(rec.task_id ?? rec.id ?? rec.name ?? `line ${i + 1}`);
        const { task_id: _t, id: _i, name: _n, ...fields } = rec;
        for (const s of strings(fields)) docs.push([name, s]);
      });
    } else docs.push([file, text]);
    for (const [name, doc] of docs) for (const g of ngrams(codeTokens(doc), n)) if (!this.index.has(g)) this.index.set(g, name);
    this.documents = docs.length;
  }

  check(program: string): Overlap {
    const grams = ngrams(codeTokens(program), this.n);
    const byDoc = new Map<string, number>();
    let hits = 0;
    for (const g of grams) {
      const doc = this.index.get(g);
      if (doc === undefined) continue;
      hits++;
      byDoc.set(doc, (byDoc.get(doc) ?? 0) + 1);
    }
    const overlap = grams.length ? hits / grams.length : 0;
    const document = [...byDoc].sort((a, b) => b[1] - a[1])[0]?.[0] ?? null;
    return { overlap, ngrams: grams.length, document, contaminated: overlap >= this.threshold && grams.length > 0 };
  }
}
