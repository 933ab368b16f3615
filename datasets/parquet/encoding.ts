/**
 * Parquet byte encodings: growable buffers whose contents are already PLAIN-encoded (UTF-8 byte
 * arrays, little-endian numbers), and the RLE / bit-packed hybrid that levels and dictionary
 * indexes are written in.
 */

// ---------------------------------------------------------------------------------------------
// Growable buffers

/** A growable byte buffer (a Node Buffer, for its native UTF-8 writer). */
export class Bytes {
  buf: Buffer;
  len = 0;
  constructor(cap = 1 << 12) {
    this.buf = Buffer.allocUnsafeSlow(cap);
  }
  ensure(n: number): void {
    if (this.len + n <= this.buf.length) return;
    const next = Buffer.allocUnsafeSlow(Math.max(this.buf.length * 2, this.len + n));
    this.buf.copy(next, 0, 0, this.len);
    this.buf = next;
  }
  push(b: number): void {
    if (this.len === this.buf.length) this.ensure(1);
    this.buf[this.len++] = b;
  }
  view(start = 0, end = this.len): Uint8Array {
    return this.buf.subarray(start, end);
  }
  /** Appends `s` as a PLAIN byte array (u32 length + UTF-8); returns its encoded length. */
  string(s: string): number {
    const n = s.length;
    this.ensure(4 + 3 * n);
    const buf = this.buf;
    const at = this.len;
    let p = at + 4;
    let bytes = -1;
    if (n <= 48) {
      let i = 0;
      for (; i < n; i++) {
        const c = s.charCodeAt(i);
        if (c >= 0x80) break;
        buf[p + i] = c;
      }
      if (i === n) bytes = n;
    }
    if (bytes < 0) bytes = buf.write(s, p, 'utf8');
    buf[at] = bytes & 0xff;
    buf[at + 1] = (bytes >>> 8) & 0xff;
    buf[at + 2] = (bytes >>> 16) & 0xff;
    buf[at + 3] = bytes >>> 24;
    p += bytes;
    this.len = p;
    return bytes + 4;
  }
  /** Drops the contents; gives back a buffer that grew past `keep` bytes. */
  reset(keep: number): void {
    this.len = 0;
    if (this.buf.length > keep) this.buf = Buffer.allocUnsafeSlow(Math.max(1 << 12, keep >> 1));
  }
}

export class Ints {
  arr: Int32Array;
  len = 0;
  constructor(cap = 1 << 10) {
    this.arr = new Int32Array(cap);
  }
  push(v: number): void {
    if (this.len === this.arr.length) {
      const next = new Int32Array(this.arr.length * 2);
      next.set(this.arr);
      this.arr = next;
    }
    this.arr[this.len++] = v;
  }
  bytes(start: number, end: number): Uint8Array {
    return new Uint8Array(this.arr.buffer, this.arr.byteOffset + start * 4, (end - start) * 4);
  }
}

export class Floats {
  arr: Float64Array;
  len = 0;
  constructor(cap = 1 << 8) {
    this.arr = new Float64Array(cap);
  }
  push(v: number): void {
    if (this.len === this.arr.length) {
      const next = new Float64Array(this.arr.length * 2);
      next.set(this.arr);
      this.arr = next;
    }
    this.arr[this.len++] = v;
  }
}

const LITTLE_ENDIAN = new Uint8Array(new Uint32Array([1]).buffer)[0] === 1;

/** Typed-array bytes in Parquet's little-endian order (a copy only on big-endian hosts). */
export function littleEndian(bytes: Uint8Array, width: number): Uint8Array {
  if (LITTLE_ENDIAN) return bytes;
  const out = new Uint8Array(bytes.length);
  for (let i = 0; i < bytes.length; i += width) for (let j = 0; j < width; j++) out[i + j] = bytes[i + width - 1 - j];
  return out;
}

// ---------------------------------------------------------------------------------------------
// RLE / bit-packed hybrid (levels and dictionary indexes)

function varint(out: Bytes, v: number): void {
  while (v > 0x7f) {
    out.push((v & 0x7f) | 0x80);
    v >>>= 7;
  }
  out.push(v);
}

function bitPacked(out: Bytes, v: ArrayLike<number>, start: number, groups: number, end: number, width: number): void {
  varint(out, (groups << 1) | 1);
  out.ensure(groups * width + 1);
  const buf = out.buf;
  let p = out.len;
  let acc = 0;
  let bits = 0;
  const total = groups * 8;
  for (let k = 0; k < total; k++) {
    const i = start + k;
    acc |= (i < end ? v[i] : 0) << bits;
    bits += width;
    while (bits >= 8) {
      buf[p++] = acc & 0xff;
      acc >>>= 8;
      bits -= 8;
    }
  }
  if (bits > 0) buf[p++] = acc & 0xff;
  out.len = p;
}

/** Encodes v[start, end) with the RLE / bit-packed hybrid; returns the bytes written. */
export function rleHybrid(out: Bytes, v: ArrayLike<number>, start: number, end: number, width: number): number {
  const begin = out.len;
  const byteWidth = (width + 7) >> 3;
  let i = start;
  let packStart = 0;
  let groups = 0;
  while (i < end) {
    const x = v[i];
    let j = i + 1;
    while (j < end && v[j] === x) j++;
    if (j - i >= 8) {
      if (groups) {
        bitPacked(out, v, packStart, groups, end, width);
        groups = 0;
      }
      varint(out, (j - i) << 1);
      for (let b = 0; b < byteWidth; b++) out.push((x >>> (8 * b)) & 0xff);
      i = j;
    } else {
      if (!groups) packStart = i;
      groups++;
      i += 8;
    }
  }
  if (groups) bitPacked(out, v, packStart, groups, end, width);
  return out.len - begin;
}

export const bitWidth = (max: number) => (max <= 0 ? 0 : 32 - Math.clz32(max));
