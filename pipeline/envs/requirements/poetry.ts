/**
 * Poetry's version constraints in PEP 440 terms, as poetry-core translates them: `^1.2.3` is
 * >=1.2.3,<2.0.0, `^0.2.3` >=0.2.3,<0.3.0, `~1.2` >=1.2,<1.3, `1.2.*` ==1.2.*, a bare `1.2` ==1.2,
 * `>=1 <2` >=1,<2, `*` nothing. A union (`^1 || ^2`) has no PEP 440 form: undefined.
 */

function release(version: string): number[] {
  return (/^\d+(?:\.\d+)*/.exec(version.trim().replace(/^v/, ''))?.[0] ?? '0').split('.').map(Number);
}

function caret(version: string): string {
  const [major, minor = 0, patch = 0] = release(version);
  const precision = release(version).length;
  const upper = major !== 0 || precision === 1 ? `${major + 1}.0.0` : minor !== 0 || precision === 2 ? `0.${minor + 1}.0` : `0.0.${patch + 1}`;
  return `>=${version},<${upper}`;
}

function tilde(version: string): string {
  const [major, minor = 0] = release(version);
  return `>=${version},<${release(version).length === 1 ? `${major + 1}.0.0` : `${major}.${minor + 1}.0`}`;
}

export function poetryToPep440(constraint: string): string | undefined {
  const c = constraint.trim();
  if (c.includes('||')) return undefined;
  if (c === '*' || c === '') return '';
  return c
    .replace(/(==|!=|<=|>=|<|>|~=|\^|~)\s+/g, '$1')
    .split(/\s*,\s*|\s+(?=[<>=!~^\d])/)
    .filter(Boolean)
    .map((part) => {
      if (part.startsWith('^')) return caret(part.slice(1).trim());
      if (part.startsWith('~') && !part.startsWith('~=')) return tilde(part.slice(1).trim());
      if (/^\d/.test(part)) return `==${part}`;
      return part;
    })
    .join(',');
}
