/**
 * A validator compiled from a schema into closures: the same rules as `validateRecord`, without
 * building a field path for every nested value. Rows that fail it go through `validateRecord`
 * for the precise field and reason, so errors read exactly the same.
 */
import { type Field, RecordError, type RecordSchema, validateRecord } from '../schemas/schema.js';

type Check = (v: unknown) => boolean;

const hasOwn = Object.prototype.hasOwnProperty;

function structCheck(fields: Record<string, Field>): Check {
  const names = Object.keys(fields);
  const checks = names.map((n) => compile(fields[n]));
  const n = names.length;
  return (v) => {
    if (typeof v !== 'object' || v === null || Array.isArray(v)) return false;
    const o = v as Record<string, unknown>;
    for (let i = 0; i < n; i++) if (!checks[i](o[names[i]])) return false;
    for (const k in o) if (!hasOwn.call(fields, k)) return false;
    return true;
  };
}

function compile(f: Field): Check {
  const t = f.type;
  let inner: Check;
  switch (t.kind) {
    case 'string':
      inner = (v) => typeof v === 'string';
      break;
    case 'int64':
      inner = (v) => typeof v === 'number' && Number.isSafeInteger(v);
      break;
    case 'int32':
      inner = (v) => typeof v === 'number' && Number.isSafeInteger(v) && v <= 2147483647 && v >= -2147483648;
      break;
    case 'float64':
      inner = (v) => typeof v === 'number';
      break;
    case 'bool':
      inner = (v) => typeof v === 'boolean';
      break;
    case 'list': {
      const item = compile(t.of);
      inner = (v) => {
        if (!Array.isArray(v)) return false;
        for (let i = 0; i < v.length; i++) if (!item(v[i])) return false;
        return true;
      };
      break;
    }
    case 'struct':
      inner = structCheck(t.fields);
      break;
  }
  return f.nullable ? (v) => v === null || v === undefined || inner(v) : (v) => v !== null && v !== undefined && inner(v);
}

/** `validateRecord`, compiled once per schema: throws the same RecordError for a bad record. */
export function compileValidator(s: RecordSchema): (record: unknown) => void {
  const ok = structCheck(s.fields);
  return (record) => {
    if (ok(record)) return;
    validateRecord(s, record);
    throw new RecordError(s.name, '(record)', 'does not fit the schema');
  };
}

type Estimate = (v: unknown) => number;

function compileEstimate(f: Field): Estimate {
  const t = f.type;
  let inner: Estimate;
  switch (t.kind) {
    case 'string':
      inner = (v) => (v as string).length + 4;
      break;
    case 'bool':
      inner = () => 1;
      break;
    case 'list': {
      const item = compileEstimate(t.of);
      inner = (v) => {
        const a = v as unknown[];
        let n = 4;
        for (let i = 0; i < a.length; i++) n += item(a[i]);
        return n;
      };
      break;
    }
    case 'struct': {
      const names = Object.keys(t.fields);
      const kids = names.map((n) => compileEstimate(t.fields[n]));
      const k = names.length;
      inner = (v) => {
        const o = v as Record<string, unknown>;
        let n = 0;
        for (let i = 0; i < k; i++) n += kids[i](o[names[i]]);
        return n;
      };
      break;
    }
    default:
      inner = () => 8;
  }
  return (v) => (v === null || v === undefined ? 1 : inner(v));
}

/**
 * Uncompressed size estimate of a valid row, compiled once per schema into closures (no switch
 * per value): cheap enough to run per row, close enough to cap row groups.
 */
export function compileEstimator(s: RecordSchema): (row: Record<string, unknown>) => number {
  return compileEstimate({ type: { kind: 'struct', fields: s.fields }, nullable: false, doc: '' }) as (row: Record<string, unknown>) => number;
}
