import { createHash } from 'node:crypto';
import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { join } from 'node:path';

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

/** Hash of every file under `dir` whose name ends with `suffix`, by relative path and content. */
export function hashTree(dir: string, suffix: string): string {
  const hash = createHash('sha256');
  const walk = (rel: string) => {
    for (const entry of readdirSync(join(dir, rel), { withFileTypes: true }).sort((a, b) => a.name.localeCompare(b.name))) {
      const path = rel ? `${rel}/${entry.name}` : entry.name;
      if (entry.isDirectory()) {
        if (entry.name !== '__pycache__') walk(path);
      } else if (!entry.name.endsWith(suffix)) continue;
      else if (entry.isSymbolicLink())
        hash
          .update(path)
          .update('\0->')
          .update(readlinkSync(join(dir, path)))
          .update('\0');
      else if (entry.isFile())
        hash
          .update(path)
          .update('\0')
          .update(readFileSync(join(dir, path)))
          .update('\0');
    }
  };
  walk('');
  return hash.digest('hex').slice(0, 12);
}
