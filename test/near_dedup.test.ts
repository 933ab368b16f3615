/**
 * Near-duplicate removal on real code: the corpus projects' Python files (toolz, h11, isodate,
 * hyperlink, simplejson) stand in for trace text. Copies with a few words changed (addresses,
 * timings) are removed; the distinct files are all kept; the counts reach manifest.json, the
 * card and the audit, and the shards (read back by DuckDB) hold exactly the kept rows.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, inject, it } from 'vitest';
import { writeDataset } from '../datasets/dataset_writer.js';
import { lshParams, NearDedup } from '../datasets/near_dedup.js';
import { tracesSchema } from '../schemas/index.js';
import { knownRows } from './fixtures/known_dataset.js';
import { cli, sql, tempDir } from './helpers.js';

function pythonFiles(dir: string): string[] {
  const out: string[] = [];
  for (const name of readdirSync(dir).sort()) {
    const p = join(dir, name);
    if (name === '.git') continue;
    if (statSync(p).isDirectory()) out.push(...pythonFiles(p));
    else if (name.endsWith('.py') && statSync(p).size > 3000) out.push(p);
  }
  return out;
}

/** `text` with every 100th word replaced, as a repr address or a timing would change. */
const perturb = (text: string, tag: string) => {
  let i = 0;
  return text.replace(/\S+/g, (w) => (++i % 100 === 0 ? `0x${tag}${i.toString(16)}` : w));
};

/** Exact Jaccard similarity of two texts' k-word shingle sets. */
function jaccard(a: string, b: string, k: number): number {
  const sh = (t: string) => {
    const w = t.split(/\s+/).filter(Boolean);
    return new Set(Array.from({ length: Math.max(1, w.length - k + 1) }, (_, i) => w.slice(i, i + k).join(' ')));
  };
  const A = sh(a);
  const B = sh(b);
  let both = 0;
  for (const x of A) if (B.has(x)) both++;
  return both / (A.size + B.size - both);
}

describe('near-duplicate removal (MinHash-LSH)', () => {
  let files: { path: string; text: string }[];

  beforeAll(() => {
    const root = inject('corpusRoot');
    files = readdirSync(root)
      .flatMap((p) => pythonFiles(join(root, p)))
      .map((path) => ({ path, text: readFileSync(path, 'utf8') }));
    // Real files that are themselves near copies (the same module vendored twice) are not distinct.
    const d = new NearDedup();
    files = files.filter((f) => !d.isDuplicate(f.text));
    expect(files.length).toBeGreaterThan(30);
  });

  it('picks bands and rows whose S-curve sits at the threshold, and estimates Jaccard from signatures', () => {
    expect(lshParams(0.8, 128)).toEqual({ bands: 11, rows: 11 });
    expect(lshParams(0.5, 128)).toEqual({ bands: 25, rows: 5 });
    expect(() => lshParams(1, 128)).toThrow(/between 0 and 1/);
    const d = new NearDedup({ permutations: 256 });
    for (const [a, b] of [
      [files[0].text, perturb(files[0].text, 'a')],
      [files[0].text, files[1].text],
    ]) {
      const sa = Array.from(d.signature(a));
      const sb = Array.from(d.signature(b));
      const estimate = sa.filter((v, i) => v === sb[i]).length / sa.length;
      expect(Math.abs(estimate - jaccard(a, b, 5))).toBeLessThan(0.1);
    }
  });

  it('removes perturbed copies, keeps every distinct file, and is the same for the same seed', () => {
    const stream = [...files.map((f) => f.text), ...files.map((f, i) => perturb(f.text, `${i}`))];
    const kept = (seed: number) => {
      const d = new NearDedup({ seed });
      return stream.map((t) => !d.isDuplicate(t));
    };
    const a = kept(7);
    expect(a.slice(0, files.length).every(Boolean)).toBe(true);
    // One word in a hundred changed leaves about 0.9 of the 5-word shingles: well over the 0.8 threshold.
    const similar = files.map((f, i) => jaccard(f.text, perturb(f.text, `${i}`), 5));
    expect(Math.min(...similar)).toBeGreaterThan(0.85);
    const removed = a.slice(files.length).filter((k) => !k).length;
    expect(removed / files.length).toBeGreaterThanOrEqual(0.9);
    expect(kept(7)).toEqual(a);
    // A stricter threshold lets the copies through.
    const strict = new NearDedup({ threshold: 0.98 });
    expect(stream.filter((t) => !strict.isDuplicate(t)).length).toBeGreaterThan(files.length * 1.5);
  });

  it('drops near-duplicate trace rows when the dataset is written, counted in manifest.json, the card and the audit', async () => {
    const base = knownRows().traces[0];
    const rows = [
      ...files.map((f, i) => ({ ...base, node_id: `tests/test_x.py::t${i}`, text: f.text })),
      ...files.map((f, i) => ({ ...base, node_id: `tests/test_x.py::copy${i}`, text: perturb(f.text, `${i}`) })),
    ];
    const reference = new NearDedup({ seed: 3 });
    const expectedKept = rows.filter((r) => !reference.isDuplicate(r.text));
    const dir = join(tempDir('near-dedup'), 'dataset');
    const m = await writeDataset(dir, [{ schema: tracesSchema, rows }], { nearDedup: { configs: ['traces', 'trajectories'], seed: 3 } });
    const removed = rows.length - expectedKept.length;
    expect(removed).toBeGreaterThanOrEqual(files.length / 2);
    expect(m.configs.traces).toMatchObject({ rows: expectedKept.length, near_duplicates_removed: removed });
    expect(m.near_dedup).toEqual({
      threshold: 0.8,
      shingleSize: 5,
      permutations: 128,
      seed: 3,
      configs: ['traces', 'trajectories'],
      bands: 11,
      rows_per_band: 11,
    });
    const ids = await sql<{ node_id: string }>(`select node_id from '${dir}/traces/data/*.parquet' order by node_id`);
    expect(ids.map((r) => r.node_id)).toEqual(expectedKept.map((r) => r.node_id).sort());
    expect(readFileSync(join(dir, 'README.md'), 'utf8')).toContain(`traces: ${removed} removed`);
    const audit = await cli(['audit', dir, '--json']);
    expect(audit.code, audit.stderr).toBe(0);
    expect((JSON.parse(audit.stdout) as { near_duplicates: unknown }).near_duplicates).toEqual({
      threshold: 0.8,
      shingle_size: 5,
      removed: { traces: removed, trajectories: 0 },
    });
  });
});
