/**
 * One definition per record kind, from which the TypeScript type (Infer), the Parquet schema,
 * the dataset card's features and the record validator are all derived, so they cannot drift.
 */
import type { SchemaElement } from 'hyparquet';

export type FieldType =
  | { kind: 'string' }
  | { kind: 'int64' }
  | { kind: 'int32' }
  | { kind: 'float64' }
  | { kind: 'bool' }
  | { kind: 'list'; of: Field }
  | { kind: 'struct'; fields: Record<string, Field> };

export interface Field<T = unknown> {
  type: FieldType;
  nullable: boolean;
  doc: string;
  /** Phantom: carries the TypeScript type for Infer. */
  readonly __t?: T;
}

type Fields = Record<string, Field>;
type InferFields<F extends Fields> = { [K in keyof F]: F[K] extends Field<infer T> ? T : never };

const field = <T>(type: FieldType, doc: string): Field<T> => ({ type, nullable: false, doc });

export const string = (doc = '') => field<string>({ kind: 'string' }, doc);
export const int64 = (doc = '') => field<number>({ kind: 'int64' }, doc);
export const int32 = (doc = '') => field<number>({ kind: 'int32' }, doc);
export const float64 = (doc = '') => field<number>({ kind: 'float64' }, doc);
export const bool = (doc = '') => field<boolean>({ kind: 'bool' }, doc);
export const list = <T>(of: Field<T>, doc = '') => field<T[]>({ kind: 'list', of }, doc);
export const struct = <F extends Fields>(fields: F, doc = '') => field<InferFields<F>>({ kind: 'struct', fields }, doc);
export const nullable = <T>(f: Field<T>): Field<T | null> => ({ ...f, nullable: true }) as Field<T | null>;

export interface RecordSchema<F extends Fields = Fields> {
  /** The dataset config name: `repos`, `tests`, ... */
  name: string;
  /** Bumped on every change of fields; written into every file's key-value metadata. */
  version: number;
  doc: string;
  fields: F;
  /** The free-text columns a model trains on; a dataset written with a tokenizer counts their tokens. */
  text?: string[];
}

export type Infer<S extends RecordSchema> = InferFields<S['fields']>;

export function defineSchema<F extends Fields>(s: RecordSchema<F>): RecordSchema<F> {
  return s;
}

/** The column holding the token count of text column `name`. */
export const tokenColumn = (name: string) => `${name}_tokens`;

/**
 * `s` with one nullable int64 `<column>_tokens` after its fields per text column (null where the
 * text is null): what a dataset written with a tokenizer stores. Derived, so it cannot drift.
 */
export function withTokenCounts(s: RecordSchema, tokenizer: string): RecordSchema {
  const counts = Object.fromEntries(
    (s.text ?? []).map((c) => [tokenColumn(c), nullable(int64(`Tokens of ${c} under ${tokenizer} (counted when the dataset was written)`))]),
  );
  return { ...s, fields: { ...s.fields, ...counts } };
}

// ---- Parquet ----

function parquetElements(name: string, f: Field, out: SchemaElement[]): void {
  const repetition_type = f.nullable ? 'OPTIONAL' : 'REQUIRED';
  const t = f.type;
  switch (t.kind) {
    case 'string':
      out.push({ name, type: 'BYTE_ARRAY', converted_type: 'UTF8', repetition_type });
      return;
    case 'int64':
      out.push({ name, type: 'INT64', repetition_type });
      return;
    case 'int32':
      out.push({ name, type: 'INT32', repetition_type });
      return;
    case 'float64':
      out.push({ name, type: 'DOUBLE', repetition_type });
      return;
    case 'bool':
      out.push({ name, type: 'BOOLEAN', repetition_type });
      return;
    case 'list':
      // The standard three-level LIST layout, which every reader (Arrow, DuckDB, polars) expects.
      out.push({ name, repetition_type, converted_type: 'LIST', num_children: 1 });
      out.push({ name: 'list', repetition_type: 'REPEATED', num_children: 1 });
      parquetElements('element', t.of, out);
      return;
    case 'struct': {
      const names = Object.keys(t.fields);
      out.push({ name, repetition_type, num_children: names.length });
      for (const n of names) parquetElements(n, t.fields[n], out);
      return;
    }
  }
}

export function parquetSchema(s: RecordSchema): SchemaElement[] {
  const names = Object.keys(s.fields);
  const out: SchemaElement[] = [{ name: 'root', num_children: names.length }];
  for (const n of names) parquetElements(n, s.fields[n], out);
  return out;
}

// ---- Hugging Face dataset card features ----

type HfFeature = Record<string, unknown>;

function hfType(f: Field): HfFeature {
  const t = f.type;
  switch (t.kind) {
    case 'string':
      return { dtype: 'string' };
    case 'int64':
      return { dtype: 'int64' };
    case 'int32':
      return { dtype: 'int32' };
    case 'float64':
      return { dtype: 'float64' };
    case 'bool':
      return { dtype: 'bool' };
    case 'list': {
      const inner = hfType(t.of);
      return { list: 'dtype' in inner ? inner.dtype : 'struct' in inner ? inner.struct : inner };
    }
    case 'struct':
      return { struct: Object.entries(t.fields).map(([name, sub]) => ({ name, ...hfType(sub) })) };
  }
}

export function hfFeatures(s: RecordSchema): HfFeature[] {
  return Object.entries(s.fields).map(([name, f]) => ({ name, ...hfType(f) }));
}

// ---- Validation ----

export class RecordError extends Error {
  constructor(
    readonly schema: string,
    readonly path: string,
    readonly reason: string,
  ) {
    super(`${schema} record rejected: ${path}: ${reason}`);
  }
}

function check(schema: string, path: string, f: Field, v: unknown): void {
  if (v === null || v === undefined) {
    if (f.nullable) return;
    throw new RecordError(schema, path, v === undefined ? 'is missing' : 'is null but the field is not nullable');
  }
  const t = f.type;
  switch (t.kind) {
    case 'string':
      if (typeof v !== 'string') throw new RecordError(schema, path, `expected a string, got ${typeof v}`);
      return;
    case 'int64':
    case 'int32':
      if (typeof v !== 'number' || !Number.isSafeInteger(v)) throw new RecordError(schema, path, `expected an integer, got ${JSON.stringify(v)}`);
      if (t.kind === 'int32' && (v > 2147483647 || v < -2147483648)) throw new RecordError(schema, path, `${v} does not fit in int32`);
      return;
    case 'float64':
      if (typeof v !== 'number') throw new RecordError(schema, path, `expected a number, got ${typeof v}`);
      return;
    case 'bool':
      if (typeof v !== 'boolean') throw new RecordError(schema, path, `expected a boolean, got ${typeof v}`);
      return;
    case 'list':
      if (!Array.isArray(v)) throw new RecordError(schema, path, `expected a list, got ${typeof v}`);
      for (const [i, item] of v.entries()) check(schema, `${path}[${i}]`, t.of, item);
      return;
    case 'struct':
      checkObject(schema, path, t.fields, v);
  }
}

function checkObject(schema: string, path: string, fields: Fields, v: unknown): void {
  if (typeof v !== 'object' || Array.isArray(v))
    throw new RecordError(schema, path || '(record)', `expected an object, got ${Array.isArray(v) ? 'a list' : typeof v}`);
  const obj = v as Record<string, unknown>;
  for (const [name, f] of Object.entries(fields)) check(schema, path ? `${path}.${name}` : name, f, obj[name]);
  for (const key of Object.keys(obj)) {
    if (!(key in fields)) throw new RecordError(schema, path ? `${path}.${key}` : key, 'is not a field of this schema');
  }
}

/** Throws a RecordError naming the field and the reason when `record` does not fit `s`. */
export function validateRecord<S extends RecordSchema>(s: S, record: unknown): asserts record is Infer<S> {
  checkObject(s.name, '', s.fields, record);
}
