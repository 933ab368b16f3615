/**
 * Column shredding: rows into per-leaf column buffers (repetition and definition levels, values
 * already encoded), one Leaf per Parquet leaf column, fed by closures compiled once per schema.
 *
 * Dictionary encoding is chosen per leaf and row group, online: a string leaf starts with a
 * dictionary and falls back to PLAIN (for the rest of the file) once its distinct values stop
 * paying for themselves, so low-cardinality columns (`kind`, `function`, local `name`) keep their
 * dictionaries and high-cardinality ones (local `value`) skip the hashing.
 */
import type { SchemaElement } from 'hyparquet';
import type { Field } from '../../schemas/schema.js';
import { Bytes, Floats, Ints } from './encoding.js';

// ---------------------------------------------------------------------------------------------
// Leaf columns and the shredder

type LeafKind = 'string' | 'int32' | 'int64' | 'float64' | 'bool';

/** A dictionary is dropped once its distinct bytes pass this, or half the column's PLAIN bytes. */
const DICT_MAX_BYTES = 1 << 20;
const DICT_MIN_VALUES = 1024;

/** Code point order, as Parquet orders UTF-8 byte arrays (JS `<` misorders surrogate pairs). */
function compareStrings(a: string, b: string): number {
  if (a === b) return 0;
  const n = Math.min(a.length, b.length);
  let i = 0;
  while (i < n && a.charCodeAt(i) === b.charCodeAt(i)) i++;
  if (i === n) return a.length - b.length;
  const ca = a.codePointAt(i > 0 && a.charCodeAt(i - 1) >= 0xd800 && a.charCodeAt(i - 1) <= 0xdbff ? i - 1 : i)!;
  const cb = b.codePointAt(i > 0 && b.charCodeAt(i - 1) >= 0xd800 && b.charCodeAt(i - 1) <= 0xdbff ? i - 1 : i)!;
  const fa = ca >= 0xd800 && ca <= 0xdfff ? 0xfffd : ca;
  const fb = cb >= 0xd800 && cb <= 0xdfff ? 0xfffd : cb;
  return fa - fb;
}

export class Leaf {
  readonly element: SchemaElement;
  /** Level slots (values and nulls) this row group. */
  slots = 0;
  nulls = 0;
  readonly defs = new Bytes();
  readonly reps = new Bytes();
  /** PLAIN values for strings and bools (one byte per bool). */
  readonly plain = new Bytes();
  readonly ints = new Ints();
  readonly floats = new Floats();
  /** Values pushed this row group. */
  values = 0;
  // dictionary state (strings)
  dictOn: boolean;
  dict = new Map<string, number>();
  readonly dictBytes = new Bytes();
  dictOffsets: number[] = [];
  /** int32 dictionaries: value -> index, and the distinct values. */
  numDict = new Map<number, number>();
  readonly dictInts = new Ints(256);
  plainBytes = 0;
  // per-row starts, for pages that begin at row boundaries
  rowSlot: number[] = [];
  rowValue: number[] = [];
  rowByte: number[] = [];
  // statistics (top-level scalars only)
  min: unknown = undefined;
  max: unknown = undefined;

  constructor(
    readonly kind: LeafKind,
    readonly path: string[],
    readonly maxDef: number,
    readonly maxRep: number,
    nullable: boolean,
    readonly stats: boolean,
    dictionary: boolean,
  ) {
    const repetition_type = nullable ? 'OPTIONAL' : 'REQUIRED';
    const name = path[path.length - 1];
    this.element =
      kind === 'string'
        ? { name, type: 'BYTE_ARRAY', converted_type: 'UTF8', repetition_type }
        : { name, type: kind === 'int32' ? 'INT32' : kind === 'int64' ? 'INT64' : kind === 'float64' ? 'DOUBLE' : 'BOOLEAN', repetition_type };
    this.dictOn = dictionary && (kind === 'string' || kind === 'int32');
  }

  get dictSize(): number {
    return this.kind === 'string' ? this.dictOffsets.length : this.dictInts.len;
  }

  startRow(): void {
    this.rowSlot.push(this.slots);
    this.rowValue.push(this.values);
    this.rowByte.push(this.plain.len);
  }

  levels(def: number, rep: number): void {
    if (this.maxRep) this.reps.push(rep);
    if (this.maxDef) this.defs.push(def);
    this.slots++;
  }

  pushNull(def: number, rep: number): void {
    this.levels(def, rep);
    this.nulls++;
  }

  push(v: unknown, def: number, rep: number): void {
    this.levels(def, rep);
    this.values++;
    switch (this.kind) {
      case 'string': {
        const s = v as string;
        if (this.dictOn) this.pushDict(s);
        else this.plain.string(s);
        break;
      }
      case 'int32':
        if (this.dictOn) this.pushIntDict(v as number);
        else this.ints.push(v as number);
        break;
      case 'int64': {
        const n = v as number;
        this.ints.push(n >>> 0);
        this.ints.push(Math.floor(n / 4294967296) | 0);
        break;
      }
      case 'float64':
        this.floats.push(v as number);
        break;
      case 'bool':
        this.plain.push(v ? 1 : 0);
        break;
    }
    if (this.stats) this.stat(v);
  }

  private stat(v: unknown): void {
    if (this.kind === 'float64' && Number.isNaN(v)) return;
    if (this.min === undefined) {
      this.min = v;
      this.max = v;
    } else if (this.kind === 'string') {
      if (compareStrings(v as string, this.min as string) < 0) this.min = v;
      if (compareStrings(v as string, this.max as string) > 0) this.max = v;
    } else if (this.kind === 'bool') {
      if (!v) this.min = false;
      if (v) this.max = true;
    } else {
      if ((v as number) < (this.min as number)) this.min = v;
      if ((v as number) > (this.max as number)) this.max = v;
    }
  }

  private pushDict(s: string): void {
    let i = this.dict.get(s);
    if (i === undefined) {
      i = this.dictOffsets.length;
      this.dictOffsets.push(this.dictBytes.len);
      this.dict.set(s, i);
      const len = this.dictBytes.string(s);
      this.plainBytes += len;
      this.ints.push(i);
      if (this.dictBytes.len > DICT_MAX_BYTES || (this.values >= DICT_MIN_VALUES && 2 * this.dictBytes.len > this.plainBytes)) this.toPlain(true);
      return;
    }
    const off = this.dictOffsets[i];
    const b = this.dictBytes.buf;
    this.plainBytes += 4 + (b[off] | (b[off + 1] << 8) | (b[off + 2] << 16) | (b[off + 3] << 24));
    this.ints.push(i);
  }

  private pushIntDict(v: number): void {
    let i = this.numDict.get(v);
    if (i === undefined) {
      i = this.dictInts.len;
      this.numDict.set(v, i);
      this.dictInts.push(v);
      this.ints.push(i);
      if (4 * i > DICT_MAX_BYTES || (this.values >= DICT_MIN_VALUES && 2 * 4 * i > 4 * this.values)) this.toPlain(true);
      return;
    }
    this.ints.push(i);
  }

  /** Rewrites this row group's dictionary indexes as PLAIN values; `sticky` keeps it PLAIN from now on. */
  toPlain(sticky: boolean): void {
    if (this.kind === 'int32') {
      const idx = this.ints.arr;
      const vals = this.dictInts.arr;
      for (let k = 0; k < this.ints.len; k++) idx[k] = vals[idx[k]];
      this.numDict = new Map();
      this.dictInts.len = 0;
      this.dictOn = false;
      this.sticky = this.sticky || sticky;
      return;
    }
    const idx = this.ints.arr;
    const n = this.ints.len;
    const d = this.dictBytes.buf;
    const offs = this.dictOffsets;
    const out = this.plain;
    out.len = 0;
    out.ensure(this.plainBytes);
    let row = 0;
    const rows = this.rowValue.length;
    for (let k = 0; k < n; k++) {
      while (row < rows && this.rowValue[row] === k) this.rowByte[row++] = out.len;
      const off = offs[idx[k]];
      const len = 4 + (d[off] | (d[off + 1] << 8) | (d[off + 2] << 16) | (d[off + 3] << 24));
      d.copy(out.buf, out.len, off, off + len);
      out.len += len;
    }
    while (row < rows) this.rowByte[row++] = out.len;
    this.ints.len = 0;
    this.dict = new Map();
    this.dictOffsets = [];
    this.dictBytes.reset(DICT_MAX_BYTES * 2);
    this.plainBytes = 0;
    this.dictOn = false;
    this.sticky = this.sticky || sticky;
  }

  sticky = false;

  /** Whether the column chunk will be dictionary-encoded. */
  get usesDictionary(): boolean {
    return this.dictOn && this.dictSize > 0;
  }

  reset(dictionary: boolean): void {
    this.slots = 0;
    this.nulls = 0;
    this.values = 0;
    this.defs.reset(64 << 20);
    this.reps.reset(64 << 20);
    this.plain.reset(256 << 20);
    this.ints.len = 0;
    this.floats.len = 0;
    this.dict = new Map();
    this.dictOffsets = [];
    this.dictBytes.reset(DICT_MAX_BYTES * 2);
    this.numDict = new Map();
    this.dictInts.len = 0;
    this.plainBytes = 0;
    this.dictOn = dictionary && (this.kind === 'string' || this.kind === 'int32') && !this.sticky;
    this.rowSlot = [];
    this.rowValue = [];
    this.rowByte = [];
    this.min = undefined;
    this.max = undefined;
  }
}

type Emit = (v: unknown, def: number, rep: number) => void;
type EmitNull = (def: number, rep: number) => void;

interface Compiled {
  emit: Emit;
  nulls: EmitNull;
}

export function compileField(f: Field, path: string[], def: number, repDepth: number, top: boolean, leaves: Leaf[], dictionary: boolean): Compiled {
  const d = def + (f.nullable ? 1 : 0);
  const t = f.type;
  let inner: Emit;
  let nulls: EmitNull;
  switch (t.kind) {
    case 'list': {
      const from = leaves.length;
      const item = compileField(t.of, [...path, 'list', 'element'], d + 1, repDepth + 1, false, leaves, dictionary);
      const mine = leaves.slice(from);
      nulls = (dl, rl) => {
        for (const l of mine) l.pushNull(dl, rl);
      };
      const r = repDepth + 1;
      const emitItem = item.emit;
      inner = (v, dl, rl) => {
        const a = v as unknown[];
        const n = a.length;
        if (!n) return nulls(dl, rl);
        emitItem(a[0], dl + 1, rl);
        for (let i = 1; i < n; i++) emitItem(a[i], dl + 1, r);
      };
      break;
    }
    case 'struct': {
      const from = leaves.length;
      const names = Object.keys(t.fields);
      const kids = names.map((n) => compileField(t.fields[n], [...path, n], d, repDepth, false, leaves, dictionary).emit);
      const mine = leaves.slice(from);
      const k = names.length;
      nulls = (dl, rl) => {
        for (const l of mine) l.pushNull(dl, rl);
      };
      inner = (v, dl, rl) => {
        const o = v as Record<string, unknown>;
        for (let i = 0; i < k; i++) kids[i](o[names[i]], dl, rl);
      };
      break;
    }
    default: {
      const leaf = new Leaf(t.kind, path, d, repDepth, f.nullable, top, dictionary);
      leaves.push(leaf);
      nulls = (dl, rl) => leaf.pushNull(dl, rl);
      inner = (v, dl, rl) => leaf.push(v, dl, rl);
    }
  }
  const emit: Emit = f.nullable ? (v, dl, rl) => (v === null || v === undefined ? nulls(dl, rl) : inner(v, dl + 1, rl)) : inner;
  return { emit, nulls };
}
