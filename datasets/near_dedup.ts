/**
 * Near-duplicate removal: MinHash over word shingles with LSH banding, streaming and keep-first
 * (the first row of a near-duplicate group is kept, later ones are dropped), as datatrove's
 * MinHash dedup does for web text. Exact duplicates are the spill's business (spill.ts); this
 * catches traces and trajectories that differ only in a few words, e.g. the same episode with
 * other object addresses or the same rollout with another timing line.
 *
 * Hashes are 32-bit (FNV-1a per word, chained per shingle, seeded multiply-add permutations with
 * Math.imul), kept as signed int32 so V8 never boxes them (a minimum under any fixed order is a
 * valid MinHash): no BigInt or doubles on the hot path. A band's key combines two independent 32-bit hashes of its values into
 * one 53-bit number, so unrelated rows collide with probability ~1e-16 per band pair.
 */

import { mulberry32 } from '../core/prng.js';

export interface NearDedupOptions {
  /** Estimated Jaccard similarity at or above which a row counts as a near duplicate (default 0.8). */
  threshold?: number;
  /** Words per shingle (default 5). */
  shingleSize?: number;
  /** Hash permutations in a signature (default 128). */
  permutations?: number;
  /** Seed of the permutations (default 0): same rows, same seed => the same rows removed. */
  seed?: number;
}

export const NEAR_DEDUP_DEFAULTS = { threshold: 0.8, shingleSize: 5, permutations: 128, seed: 0 } as const;

/** A 32-bit finalizer (murmur3's), so multiply-add permutations of FNV output mix well. */
function mix(h: number): number {
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  return h ^ (h >>> 16);
}

/**
 * Bands b and rows r (b * r <= permutations) whose S-curve (1/b)^(1/r) lies closest to the
 * threshold, preferring more bands on ties (fewer missed duplicates).
 */
export function lshParams(threshold: number, permutations: number): { bands: number; rows: number } {
  if (!(threshold > 0 && threshold < 1)) throw new RangeError(`the near-duplicate threshold must be between 0 and 1 (got ${threshold})`);
  let best = { bands: 1, rows: permutations, err: Number.POSITIVE_INFINITY };
  for (let rows = 1; rows <= permutations; rows++) {
    const bands = Math.floor(permutations / rows);
    const err = Math.abs((1 / bands) ** (1 / rows) - threshold);
    if (err < best.err - 1e-12) best = { bands, rows, err };
  }
  return { bands: best.bands, rows: best.rows };
}

export class NearDedup {
  readonly bands: number;
  readonly rows: number;
  readonly settings: Required<NearDedupOptions>;
  /** Rows seen and rows found to be near duplicates of an earlier one. */
  seen = 0;
  removed = 0;
  private readonly a: Int32Array;
  private readonly b: Int32Array;
  private readonly sig: Int32Array;
  private readonly keys: Set<number>[];

  constructor(opts: NearDedupOptions = {}) {
    this.settings = { ...NEAR_DEDUP_DEFAULTS, ...opts };
    const { permutations, shingleSize, seed, threshold } = this.settings;
    if (!Number.isInteger(shingleSize) || shingleSize < 1) throw new RangeError(`the shingle size must be a positive integer (got ${shingleSize})`);
    if (!Number.isInteger(permutations) || permutations < 2) throw new RangeError(`permutations must be an integer of at least 2 (got ${permutations})`);
    ({ bands: this.bands, rows: this.rows } = lshParams(threshold, permutations));
    const rand = mulberry32(seed);
    this.a = Int32Array.from({ length: permutations }, () => rand() | 1);
    this.b = Int32Array.from({ length: permutations }, () => rand() | 0);
    this.sig = new Int32Array(permutations);
    this.keys = Array.from({ length: this.bands }, () => new Set<number>());
  }

  /** The MinHash signature of `text`'s word shingles (written into a reused buffer). */
  signature(text: string): Int32Array {
    const { sig, a, b } = this;
    sig.fill(0x7fffffff);
    const k = this.settings.shingleSize;
    // Each word is hashed once (FNV-1a over its characters, split on ASCII whitespace); a shingle's
    // hash chains its k word hashes, so no shingle string is ever built.
    const words: number[] = [];
    let h = 0x811c9dc5;
    let inWord = false;
    for (let i = 0; i <= text.length; i++) {
      const c = i < text.length ? text.charCodeAt(i) : 32;
      if (c === 32 || c === 10 || c === 9 || c === 13 || c === 12 || c === 11) {
        if (inWord) words.push(h);
        inWord = false;
        h = 0x811c9dc5;
      } else {
        inWord = true;
        h = Math.imul(h ^ c, 0x01000193) | 0;
      }
    }
    const n = words.length ? Math.max(1, words.length - k + 1) : 0;
    for (let i = 0; i < n; i++) {
      let x = 0;
      for (let j = i; j < Math.min(i + k, words.length); j++) x = (mix(x ^ words[j]) + j - i) | 0;
      x = mix(x);
      for (let p = 0; p < sig.length; p++) {
        const v = (Math.imul(a[p], x) + b[p]) | 0;
        if (v < sig[p]) sig[p] = v;
      }
    }
    return sig;
  }

  /** True when `text` is a near duplicate of a row seen before; otherwise remembers it. */
  isDuplicate(text: string): boolean {
    this.seen++;
    const sig = this.signature(text);
    const bandKeys = new Array<number>(this.bands);
    let dup = false;
    for (let band = 0; band < this.bands; band++) {
      let h1 = 0x9e3779b9 ^ band;
      let h2 = 0x85ebca6b ^ band;
      for (let r = band * this.rows; r < (band + 1) * this.rows; r++) {
        h1 = mix(h1 ^ sig[r]);
        h2 = mix(Math.imul(h2, 31) ^ sig[r] ^ 0x27d4eb2f);
      }
      const key = (h1 & 0x1fffff) * 0x100000000 + (h2 >>> 0);
      bandKeys[band] = key;
      if (this.keys[band].has(key)) dup = true;
    }
    if (dup) {
      this.removed++;
      return true;
    }
    for (let band = 0; band < this.bands; band++) this.keys[band].add(bandKeys[band]);
    return false;
  }
}
