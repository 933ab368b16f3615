/**
 * The `huggingface` key-value metadata every shard carries, derived from the schema DSL: Hugging
 * Face `datasets` reads `{"info": {"features": ...}}` from a Parquet file's schema metadata to
 * restore exact Features instead of inferring them from the Arrow types.
 *
 * Format: the `datasets` >= 4 dict form. A scalar is `{"dtype": "string", "_type": "Value"}`, a
 * struct is a plain object of its fields (HF's dict feature), and a list is
 * `{"feature": <item>, "_type": "List"}`. We pick `List` over the older `Sequence` on purpose:
 * `Sequence` of a dict means a dict of lists in HF's legacy semantics, which is not how we store
 * frames (list<struct>). `datasets` < 4 does not know `List` and rejects the metadata; users on
 * 3.x pass `features=` themselves or upgrade.
 * Nullability has no place in HF features (every Value is nullable there).
 */
import type { Field, RecordSchema } from '../schemas/schema.js';

export type HfFeatureDict = { [key: string]: unknown };

const DTYPES = { string: 'string', int64: 'int64', int32: 'int32', float64: 'float64', bool: 'bool' } as const;

export function hfFeature(f: Field): HfFeatureDict {
  const t = f.type;
  switch (t.kind) {
    case 'list':
      return { feature: hfFeature(t.of), _type: 'List' };
    case 'struct': {
      const out: HfFeatureDict = {};
      for (const [name, sub] of Object.entries(t.fields)) out[name] = hfFeature(sub);
      return out;
    }
    default:
      return { dtype: DTYPES[t.kind], _type: 'Value' };
  }
}

/** `{"name": feature, ...}` in schema order: the `features` of `datasets.DatasetInfo`. */
export function hfFeatureDict(s: RecordSchema): HfFeatureDict {
  const out: HfFeatureDict = {};
  for (const [name, f] of Object.entries(s.fields)) out[name] = hfFeature(f);
  return out;
}

/** The value of the `huggingface` key-value metadata entry (what `datasets` itself writes). */
export function huggingfaceMetadata(s: RecordSchema): string {
  return JSON.stringify({ info: { features: hfFeatureDict(s) } });
}
