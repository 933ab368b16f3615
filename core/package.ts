import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The package root, found from this file whether it runs from source (vitest) or from dist/. */
export const packageRoot: string = (() => {
  let dir = dirname(fileURLToPath(import.meta.url));
  while (!existsSync(join(dir, 'package.json'))) {
    const parent = dirname(dir);
    if (parent === dir) throw new Error('worldline: cannot find package.json above ' + fileURLToPath(import.meta.url));
    dir = parent;
  }
  return dir;
})();

/** This package's version, recorded in every dataset's provenance. */
export function toolVersion(): string {
  return (JSON.parse(readFileSync(join(packageRoot, 'package.json'), 'utf8')) as { version: string }).version;
}
