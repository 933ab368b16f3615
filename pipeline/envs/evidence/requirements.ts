/**
 * Requirements files found by name: requirements.txt, requirements-test.txt, test-requirements.txt,
 * dev_requirements.txt, requirements/*.txt (and pip-tools' .in inputs, read instead of the pinned
 * .txt compiled from them). The file's own name says the group: "test" is test, "docs" docs, plain
 * requirements.txt or requirements/base.txt runtime, anything else (packaging.txt, py38.txt) an extra.
 */

import { posix } from 'node:path';
import { type EvidenceContext, type Group, groupOfName } from './context.js';

const NAMED = /^(?:.*[-_.])?requirements?(?:[-_.].*)?\.(?:txt|in)$/i;
const FOLDERS = ['requirements', 'reqs'];
const RUNTIME = new Set(['requirements', 'requirement', 'base', 'main', 'prod', 'production', 'install', 'runtime', 'common', 'core', 'default']);

function groupOfFile(path: string): Group {
  const stem = posix.basename(path).replace(/\.(txt|in)$/, '');
  const group = groupOfName(stem, 'extra');
  if (group !== 'extra') return group;
  const words = stem
    .toLowerCase()
    .split(/[^a-z0-9]+/)
    .filter((w) => w !== 'requirements' && w !== 'requirement');
  return words.every((w) => RUNTIME.has(w)) ? 'runtime' : 'extra';
}

export function readRequirementFiles(ctx: EvidenceContext): void {
  const found = [
    ...ctx.checkout.list('.').filter((n) => NAMED.test(n)),
    ...FOLDERS.flatMap((dir) =>
      ctx.checkout
        .list(dir)
        .filter((n) => /\.(txt|in)$/.test(n))
        .map((n) => `${dir}/${n}`),
    ),
  ];
  const names = new Set(found);
  for (const path of found) {
    if (path.endsWith('.txt') && names.has(path.replace(/\.txt$/, '.in'))) continue;
    ctx.addRequirementsFile(path, groupOfFile(path), `requirements:${path}`);
  }
}
