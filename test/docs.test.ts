/**
 * The documentation a newcomer reads is checked like code: docs/cli.md and docs/configs.md are
 * what `npm run docs` makes from the CLI's --help and schemas/ (stale pages fail here), every
 * JSON Lines example in the README is a manifest the real parser accepts, and no page points at
 * a file the repository does not have.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { packageRoot } from '../core/package.js';
import { parseManifest } from '../pipeline/runtime/manifest.js';
import { cliDoc, configsDoc } from '../scripts/docs.js';

const read = (path: string) => readFileSync(join(packageRoot, path), 'utf8');
const pages = ['README.md', ...readdirSync(join(packageRoot, 'docs')).map((f) => `docs/${f}`), 'bench/RESULTS.md'];

describe('the documentation', () => {
  it("has docs/cli.md in step with every command's --help (npm run docs rewrites it)", () => {
    expect(read('docs/cli.md'), 'docs/cli.md is stale: run npm run docs').toBe(cliDoc());
  }, 120_000);

  it('has docs/configs.md in step with schemas/', () => {
    expect(read('docs/configs.md'), 'docs/configs.md is stale: run npm run docs').toBe(configsDoc());
  });

  it('gives README manifest examples, each line of which the manifest parser takes', () => {
    const readme = read('README.md');
    const blocks = [...readme.matchAll(/^```jsonl\n([\s\S]*?)^```$/gm)].map((m) => m[1]);
    expect(blocks.length).toBeGreaterThan(0);
    for (const block of blocks) {
      const m = parseManifest(block, join(packageRoot, 'README.md'));
      expect(m.errors, block).toEqual([]);
      expect(m.units.length, block).toBe(block.trim().split('\n').length);
    }
  });

  it('keeps the README a guide (under 300 lines) with the two commands CI and a newcomer run', () => {
    const readme = read('README.md');
    expect(readme.split('\n').length).toBeLessThan(300);
    expect(readme).toContain('npm ci && npm run demo');
    expect(readme).toMatch(/^npm test$/m);
  });

  it('links only to files the repository has', () => {
    for (const page of pages) {
      const text = read(page);
      expect(text, page).not.toMatch(/shared\/(DESIGN|research)/);
      for (const [, target] of text.matchAll(/\]\(([^)#\s]+)(#[^)]*)?\)/g)) {
        if (/^[a-z]+:/.test(target)) continue;
        expect(existsSync(resolve(dirname(join(packageRoot, page)), target)), `${page} links to ${target}`).toBe(true);
      }
    }
  });
});
