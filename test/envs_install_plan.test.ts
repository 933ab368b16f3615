/**
 * The project's own install plan (pipeline/envs/plan/install_plan.ts), read from its files as text: its
 * version where flit and setuptools' `attr:` read it, its import root and entry points; and files a
 * repository may lay out to make the read go astray (a folder where a file is expected, a link out
 * of the checkout) read as absent, never followed or fatal.
 */
import { mkdirSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { readEvidence } from '../pipeline/envs/evidence/read.js';
import { installPlan } from '../pipeline/envs/plan/install_plan.js';
import { tempDir, writeTree } from './helpers.js';

describe('installPlan', () => {
  it('takes the version from the package, the import root from package-dir and the entry points from pyproject', () => {
    const dir = writeTree(tempDir('plan'), {
      'pyproject.toml': [
        '[project]',
        'name = "tidy-words"',
        'dynamic = ["version"]',
        '[project.scripts]',
        'tidy = "tidy_words.cli:main"',
        '[tool.setuptools.package-dir]',
        '"" = "lib"',
      ].join('\n'),
      'lib/tidy_words/__init__.py': '__version__ = "2.4.1"\n',
    });
    const plan = installPlan(dir, false, readEvidence(dir), '0.1.dev3', false);
    expect(plan).toMatchObject({ name: 'tidy-words', version: '2.4.1', root: '/repo/lib', entry_points: { console_scripts: { tidy: 'tidy_words.cli:main' } } });
  });

  it('reads a folder named setup.cfg and a pyproject.toml linked out of the checkout as absent', () => {
    const outside = writeTree(tempDir('plan-outside'), {
      'pyproject.toml': '[project]\nname = "stolen"\nversion = "9.9"\n[project.scripts]\nstolen = "x:y"\n',
    });
    const dir = writeTree(tempDir('plan-hostile'), {
      'setup.py': 'from setuptools import setup\nsetup(name="hostile", version="1.0")\n',
      'hostile/__init__.py': '',
    });
    mkdirSync(join(dir, 'setup.cfg'));
    symlinkSync(join(outside, 'pyproject.toml'), join(dir, 'pyproject.toml'));
    const ev = readEvidence(dir);
    const plan = installPlan(dir, false, { ...ev, project: { ...ev.project, name: 'hostile' } }, '1.0', false);
    expect(plan).toMatchObject({ name: 'hostile', root: '/repo', entry_points: {} });
  });
});
