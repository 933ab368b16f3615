/** Every record kind round-trips through our writer and DuckDB, nested structs included. */
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { writeDataset } from '../datasets/dataset_writer.js';
import { readRows } from '../datasets/reader.js';
import { SCHEMAS } from '../schemas/index.js';
import { type Field, hfFeatures, type RecordSchema, validateRecord } from '../schemas/schema.js';
import { tempDir } from './helpers.js';

/** A deterministic sample value for a field: every nested level filled, nulls where allowed. */
function sample(f: Field, i: number, path: string): unknown {
  if (f.nullable && i % 3 === 2) return null;
  const t = f.type;
  switch (t.kind) {
    case 'string':
      return `${path}#${i} "quoted" é ✓`;
    case 'int32':
      return i * 7 - 3;
    case 'int64':
      return i * 1_000_000_007;
    case 'float64':
      return i + 0.25;
    case 'bool':
      return i % 2 === 0;
    case 'list':
      return Array.from({ length: i % 3 }, (_, j) => sample(t.of, i + j, `${path}[${j}]`));
    case 'struct':
      return Object.fromEntries(Object.entries(t.fields).map(([n, sub]) => [n, sample(sub, i, `${path}.${n}`)]));
  }
}

const row = (s: RecordSchema, i: number) => Object.fromEntries(Object.entries(s.fields).map(([n, f]) => [n, sample(f, i, n)]));

describe('record schemas', () => {
  it('has one schema per record kind named in DESIGN.md', () => {
    expect(Object.keys(SCHEMAS).sort()).toEqual(['repos', 'tasks', 'tests', 'trace_descriptions', 'traces', 'trajectories']);
    for (const s of Object.values(SCHEMAS)) expect(hfFeatures(s).map((f) => f.name)).toEqual(Object.keys(s.fields));
  });

  it('writes every kind and reads every value back through DuckDB', async () => {
    const dir = join(tempDir('schemas'), 'dataset');
    const sources = Object.values(SCHEMAS).map((schema) => ({ schema, rows: Array.from({ length: 9 }, (_, i) => row(schema, i)) }));
    for (const { schema, rows } of sources) for (const r of rows) validateRecord(schema, r);
    await writeDataset(dir, sources, { shuffle: false });
    for (const { schema, rows } of sources) {
      const back: Record<string, unknown>[] = [];
      for await (const r of readRows(dir, { config: schema.name })) back.push(r);
      expect(back, schema.name).toEqual(rows);
    }
  });
});
