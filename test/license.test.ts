import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { detectLicense } from '../core/license.js';

function folder(files: Record<string, string>): string {
  const dir = mkdtempSync(join(tmpdir(), 'wl-license-'));
  for (const [name, text] of Object.entries(files)) writeFileSync(join(dir, name), text);
  return dir;
}

describe('license detection', () => {
  it('reads the Files: * paragraph of a Debian machine-readable copyright file', () => {
    const deb = [
      'Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/',
      'Upstream-Name: toolz',
      '',
      'Files: *',
      'Copyright: 2013 Matthew Rocklin',
      'License: BSD-3-clause',
      '',
      'Files: debian/*',
      'License: GPL-2+',
      '',
    ].join('\n');
    expect(detectLicense(folder({ COPYING: deb }))).toEqual({ spdx: 'BSD-3-Clause', file: 'COPYING' });
  });

  it('recognises license texts and says unknown otherwise', () => {
    expect(detectLicense(folder({ LICENSE: 'MIT License\n\nPermission is hereby granted, free of charge, to any person' })).spdx).toBe('MIT');
    expect(detectLicense(folder({ 'LICENSE.txt': 'Apache License\nVersion 2.0, January 2004' })).spdx).toBe('Apache-2.0');
    expect(detectLicense(folder({ LICENSE: 'All rights reserved.' }))).toEqual({ spdx: 'unknown', file: 'LICENSE' });
    expect(detectLicense(folder({ 'README.md': 'hi' }))).toEqual({ spdx: 'unknown', file: null });
  });
});
