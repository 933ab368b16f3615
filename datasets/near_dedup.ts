/**
 * Near-duplicate removal: MinHash over word shingles with LSH banding, streaming and keep-first
 * (the first row of a near-duplicate group is kept, later ones are dropped), as datatrove's
 * MinHash dedup does for web text. Exact duplicates are the spill's business (spill.ts); this
 * catches traces and trajectories that differ only in a few words, e.g. the same episode with
 * other object addresses or the same rollout with another timing line.
 *
 * Hashes are 32-bit (FNV-1a for shingles, seeded multiply-add permutations with Math.imul): no
 * BigInt on the hot path. A band's key combines two independent 32-bit hashes of its values into
 * one 53-bit number, so unrelated rows collide with probability ~1e-16 per band pair.
 */

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

/** mulberry32: a small seeded PRNG, enough to draw permutation coefficients. */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return (t ^ (t >>> 14)) >>> 0;
  };
}

function fnv1a(s: string, from: number, to: number): number {
  let h = 0x811c9dc5;
  for (let i = from; i < to; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

/** A 32-bit finalizer (murmur3's), so multiply-add permutations of FNV output mix well. */
function mix(h: number): number {
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  return (h ^ (h >>> 16)) >>> 0;
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
  private readonly a: Uint32Array;
  private readonly b: Uint32Array;
  private readonly sig: Uint32Array;
  private readonly keys: Set<number>[];

  constructor(opts: NearDedupOptions = {}) {
    this.settings = { ...NEAR_DEDUP_DEFAULTS, ...opts };
    const { permutations, shingleSize, seed, threshold } = this.settings;
    if (!Number.isInteger(shingleSize) || shingleSize < 1) throw new RangeError(`the shingle size must be a positive integer (got ${shingleSize})`);
    if (!Number.isInteger(permutations) || permutations < 2) throw new RangeError(`permutations must be an integer of at least 2 (got ${permutations})`);
    ({ bands: this.bands, rows: this.rows } = lshParams(threshold, permutations));
    const rand = prng(seed);
    this.a = Uint32Array.from({ length: permutations }, () => rand() | 1);
    this.b = Uint32Array.from({ length: permutations }, () => rand());
    this.sig = new Uint32Array(permutations);
    this.keys = Array.from({ length: this.bands }, () => new Set<number>());
  }

  /** The MinHash signature of `text`'s word shingles (written into a reused buffer). */
  signature(text: string): Uint32Array {
    const { sig, a, b } = this;
    sig.fill(0xffffffff);
    const k = this.settings.shingleSize;
    // Word boundaries, so a shingle is hashed straight from the text without building strings.
    const starts: number[] = [];
    const ends: number[] = [];
    const word = /\S+/g;
    for (let m = word.exec(text); m; m = word.exec(text)) {
      starts.push(m.index);
      ends.push(m.index + m[0].length);
    }
    const n = Math.max(1, starts.length - k + 1);
    for (let i = 0; i < n && starts.length; i++) {
      const h = mix(fnv1a(text, starts[i], ends[Math.min(i + k, starts.length) - 1]));
      for (let p = 0; p < sig.length; p++) {
        const v = (Math.imul(a[p], h) + b[p]) >>> 0;
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
      const key = (h1 & 0x1fffff) * 0x100000000 + h2;
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
