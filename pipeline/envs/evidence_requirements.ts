/**
 * Requirements files found by name: requirements.txt, requirements-test.txt, test-requirements.txt,
 * dev_requirements.txt, requirements/*.txt (and pip-tools' .in inputs, read instead of the pinned
 * .txt compiled from them). The name says the group: "test" is test, "docs" docs, plain is runtime.
 */
import { type EvidenceContext, groupOfName } from './evidence_context.js';

const NAMED = /^(?:.*[-_.])?requirements?(?:[-_.].*)?\.(?:txt|in)$/i;
const FOLDERS = ['requirements', 'reqs'];

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
    ctx.addRequirementsFile(path, groupOfName(path.replace(/\.(txt|in)$/, ''), 'runtime'), `requirements:${path}`);
  }
}
