/**
 * License detection from LICENSE/COPYING-style files: Debian machine-readable copyright files
 * name their license, other files are recognised by phrases every copy of a license text has.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

const LICENSE_FILE = /^(licen[cs]e|copying|copyright|unlicen[cs]e)([._-].*)?$/i;

/** Debian's short names (DEP-5) to SPDX ids. */
const DEBIAN_TO_SPDX: Record<string, string> = {
  expat: 'MIT',
  mit: 'MIT',
  'bsd-2-clause': 'BSD-2-Clause',
  'bsd-3-clause': 'BSD-3-Clause',
  'apache-2.0': 'Apache-2.0',
  'psf-2': 'PSF-2.0',
  'psf-2.0': 'PSF-2.0',
  python: 'PSF-2.0',
  isc: 'ISC',
  'mpl-2.0': 'MPL-2.0',
  'gpl-2': 'GPL-2.0-only',
  'gpl-2+': 'GPL-2.0-or-later',
  'gpl-3': 'GPL-3.0-only',
  'gpl-3+': 'GPL-3.0-or-later',
  'lgpl-2.1': 'LGPL-2.1-only',
  'lgpl-2.1+': 'LGPL-2.1-or-later',
  'lgpl-3': 'LGPL-3.0-only',
  'lgpl-3+': 'LGPL-3.0-or-later',
  'afl-2.1': 'AFL-2.1',
  zlib: 'Zlib',
  'public-domain': 'LicenseRef-public-domain',
};

/** Ordered: the first rule whose phrases all occur wins, so specific texts come first. */
const TEXT_RULES: { spdx: string; all: RegExp[]; none?: RegExp[] }[] = [
  { spdx: 'Apache-2.0', all: [/apache license/i, /version 2\.0/i] },
  { spdx: 'MPL-2.0', all: [/mozilla public license/i, /2\.0/] },
  { spdx: 'AGPL-3.0-only', all: [/gnu affero general public license/i, /version 3/i] },
  { spdx: 'LGPL-3.0-only', all: [/gnu lesser general public license/i, /version 3/i] },
  { spdx: 'LGPL-2.1-only', all: [/gnu lesser general public license/i, /version 2\.1/i] },
  { spdx: 'GPL-3.0-only', all: [/gnu general public license/i, /version 3/i] },
  { spdx: 'GPL-2.0-only', all: [/gnu general public license/i, /version 2/i] },
  { spdx: 'PSF-2.0', all: [/python software foundation license/i] },
  { spdx: 'BSD-3-Clause', all: [/redistribution and use in source and binary forms/i, /(neither the name|names of its contributors)/i] },
  { spdx: 'BSD-2-Clause', all: [/redistribution and use in source and binary forms/i] },
  { spdx: 'MIT', all: [/permission is hereby granted, free of charge/i] },
  { spdx: 'ISC', all: [/permission to use, copy, modify, and(\/or)? distribute this software for any purpose/i] },
  { spdx: 'Unlicense', all: [/this is free and unencumbered software released into the public domain/i] },
  { spdx: 'Zlib', all: [/this software is provided 'as-is'/i, /altered source versions must be plainly marked/i] },
];

/** The `License:` of the `Files: *` paragraph of a DEP-5 copyright file, as SPDX. */
function fromDebianCopyright(text: string): string | null {
  if (!/^Format:\s*\S*copyright-format/im.test(text)) return null;
  for (const para of text.split(/\n\s*\n/)) {
    if (!/^Files:\s*\*\s*$/m.test(para)) continue;
    const m = /^License:\s*(.+)$/m.exec(para);
    if (!m) continue;
    const ids = m[1]
      .trim()
      .split(/\s+or\s+/i)
      .map((id) => DEBIAN_TO_SPDX[id.toLowerCase()] ?? null);
    if (ids.every((id) => id)) return ids.join(' OR ');
  }
  return null;
}

function fromText(text: string): string | null {
  for (const rule of TEXT_RULES) if (rule.all.every((re) => re.test(text))) return rule.spdx;
  return null;
}

export interface DetectedLicense {
  spdx: string;
  file: string | null;
}

/** Looks at the root of a checkout; `unknown` when no file or no rule matches. */
export function detectLicense(root: string): DetectedLicense {
  const candidates = readdirSync(root, { withFileTypes: true })
    .filter((e) => e.isFile() && LICENSE_FILE.test(e.name))
    .map((e) => e.name)
    .sort();
  for (const file of candidates) {
    const text = readFileSync(join(root, file), 'utf8').slice(0, 200_000);
    const spdx = fromDebianCopyright(text) ?? fromText(text);
    if (spdx) return { spdx, file };
  }
  return { spdx: 'unknown', file: candidates[0] ?? null };
}

/** The default `--licenses` allow-list: permissive licenses only (no copyleft, weak or strong). */
export const PERMISSIVE_LICENSES = [
  'MIT',
  'BSD-2-Clause',
  'BSD-3-Clause',
  'Apache-2.0',
  'ISC',
  'PSF-2.0',
  'Zlib',
  'Unlicense',
  '0BSD',
  'LicenseRef-public-domain',
];

/** Whether a detected license (an SPDX id, `A OR B`, or `unknown`) is on the allow-list: one allowed alternative suffices. */
export function licenseAllowed(spdx: string, allow: readonly string[]): boolean {
  const allowed = new Set(allow.map((l) => l.toLowerCase()));
  return spdx.split(/\s+OR\s+/i).some((id) => allowed.has(id.trim().toLowerCase()));
}
