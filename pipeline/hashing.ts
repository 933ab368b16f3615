import { createHash } from 'node:crypto';

/** JSON with object keys sorted at every depth, so equal values always hash equally. */
export function stableStringify(value: unknown): string {
  return JSON.stringify(value, (_key, v: unknown) => {
    if (v && typeof v === 'object' && !Array.isArray(v)) {
      const sorted: Record<string, unknown> = {};
      for (const k of Object.keys(v as object).sort()) sorted[k] = (v as Record<string, unknown>)[k];
      return sorted;
    }
    return v;
  });
}

export function sha256(data: string | Uint8Array): string {
  return createHash('sha256').update(data).digest('hex');
}

/** Short content hash of any JSON value: the key of configs, images and units. */
export function hashOf(value: unknown, length = 12): string {
  return sha256(stableStringify(value)).slice(0, length);
}
