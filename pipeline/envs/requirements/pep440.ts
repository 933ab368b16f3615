/**
 * PEP 440 versions and specifiers, as `packaging` reads them: enough to check a candidate version
 * (what a Debian suite ships) against the bounds a project declares. A candidate is an installed
 * version, not a choice among releases, so pre-releases are accepted as `pip check` accepts them.
 */

export interface Version {
  epoch: number;
  release: number[];
  pre?: { label: 'a' | 'b' | 'rc'; n: number };
  post?: number;
  dev?: number;
  local?: (string | number)[];
}

export type SpecifierOp = '~=' | '==' | '!=' | '<=' | '>=' | '<' | '>' | '===';

export interface Specifier {
  op: SpecifierOp;
  /** As written after the operator ("1.2.*", "2.0"). */
  version: string;
}

export class VersionError extends Error {}

const VERSION_RE =
  /^v?(?:(?<epoch>\d+)!)?(?<release>\d+(?:\.\d+)*)(?:[-_.]?(?<preL>alpha|a|beta|b|preview|pre|c|rc)[-_.]?(?<preN>\d+)?)?(?:-(?<postN1>\d+)|[-_.]?(?<postL>post|rev|r)[-_.]?(?<postN2>\d+)?)?(?:[-_.]?(?<devL>dev)[-_.]?(?<devN>\d+)?)?(?:\+(?<local>[a-z0-9]+(?:[-_.][a-z0-9]+)*))?$/i;

const PRE_LABELS: Record<string, 'a' | 'b' | 'rc'> = { a: 'a', alpha: 'a', b: 'b', beta: 'b', c: 'rc', rc: 'rc', pre: 'rc', preview: 'rc' };

export function parseVersion(text: string): Version {
  const m = VERSION_RE.exec(text.trim());
  if (!m?.groups) throw new VersionError(`not a PEP 440 version: ${JSON.stringify(text)}`);
  const g = m.groups;
  const v: Version = { epoch: g.epoch ? Number(g.epoch) : 0, release: g.release.split('.').map(Number) };
  if (g.preL) v.pre = { label: PRE_LABELS[g.preL.toLowerCase()], n: Number(g.preN ?? 0) };
  if (g.postN1 !== undefined) v.post = Number(g.postN1);
  else if (g.postL) v.post = Number(g.postN2 ?? 0);
  if (g.devL) v.dev = Number(g.devN ?? 0);
  if (g.local) v.local = g.local.split(/[-_.]/).map((s) => (/^\d+$/.test(s) ? Number(s) : s.toLowerCase()));
  return v;
}

export function isPrerelease(v: Version): boolean {
  return v.pre !== undefined || v.dev !== undefined;
}

function cmpNumbers(a: number[], b: number[]): number {
  for (let i = 0; i < Math.max(a.length, b.length); i++) {
    const d = (a[i] ?? 0) - (b[i] ?? 0);
    if (d !== 0) return Math.sign(d);
  }
  return 0;
}

const PRE_ORDER = { a: 0, b: 1, rc: 2 };

/** `packaging`'s sort key, piece by piece: a dev-only release sorts before its pre-releases, a final release after them. */
function preKey(v: Version): number[] {
  if (v.pre) return [0, PRE_ORDER[v.pre.label], v.pre.n];
  return v.post === undefined && v.dev !== undefined ? [-1] : [1];
}

function cmpLocal(a: (string | number)[] | undefined, b: (string | number)[] | undefined): number {
  if (!a || !b) return a ? 1 : b ? -1 : 0;
  for (let i = 0; i < Math.max(a.length, b.length); i++) {
    const x = a[i];
    const y = b[i];
    if (x === undefined || y === undefined) return x === undefined ? -1 : 1;
    if (x === y) continue;
    // Numeric segments sort after alphanumeric ones (PEP 440).
    if (typeof x !== typeof y) return typeof x === 'number' ? 1 : -1;
    return x < y ? -1 : 1;
  }
  return 0;
}

export function compareVersions(a: Version, b: Version): number {
  return (
    Math.sign(a.epoch - b.epoch) ||
    cmpNumbers(a.release, b.release) ||
    cmpNumbers(preKey(a), preKey(b)) ||
    Math.sign((a.post ?? -1) - (b.post ?? -1)) ||
    Math.sign((a.dev ?? Number.POSITIVE_INFINITY) - (b.dev ?? Number.POSITIVE_INFINITY) || 0) ||
    cmpLocal(a.local, b.local)
  );
}

const SPEC_RE = /^\s*(~=|===|==|!=|<=|>=|<|>)\s*([^\s,;]+)\s*$/;

export function parseSpecifier(text: string): Specifier {
  const m = SPEC_RE.exec(text);
  if (!m) throw new VersionError(`not a version specifier: ${JSON.stringify(text)}`);
  const spec = { op: m[1] as SpecifierOp, version: m[2] };
  if (spec.op === '===') return spec;
  const wildcard = spec.version.endsWith('.*');
  if (wildcard && spec.op !== '==' && spec.op !== '!=') throw new VersionError(`"${spec.op}" takes no wildcard: ${JSON.stringify(text)}`);
  const v = parseVersion(wildcard ? spec.version.slice(0, -2) : spec.version);
  if (spec.op === '~=' && v.release.length < 2) throw new VersionError(`"~=" needs two release numbers: ${JSON.stringify(text)}`);
  return spec;
}

/** A comma-separated list ("" is no bound at all). */
export function parseSpecifiers(text: string): Specifier[] {
  return text.trim() ? text.split(',').map(parseSpecifier) : [];
}

const publicOf = (v: Version): Version => ({ ...v, local: undefined });
const baseOf = (v: Version): Version => ({ epoch: v.epoch, release: v.release });

function matchesPrefix(v: Version, prefix: Version): boolean {
  if (v.epoch !== prefix.epoch) return false;
  const padded = prefix.release.map((_, i) => v.release[i] ?? 0);
  return cmpNumbers(padded, prefix.release) === 0;
}

function equalTo(v: Version, spec: string): boolean {
  if (spec.endsWith('.*')) return matchesPrefix(v, parseVersion(spec.slice(0, -2)));
  const target = parseVersion(spec);
  return compareVersions(target.local ? v : publicOf(v), target) === 0;
}

export function satisfies(version: Version | string, spec: Specifier): boolean {
  if (spec.op === '===') return (typeof version === 'string' ? version.trim() : formatVersion(version)).toLowerCase() === spec.version.toLowerCase();
  const v = typeof version === 'string' ? parseVersion(version) : version;
  const target = spec.version.endsWith('.*') ? undefined : parseVersion(spec.version);
  switch (spec.op) {
    case '==':
      return equalTo(v, spec.version);
    case '!=':
      return !equalTo(v, spec.version);
    case '~=': {
      const t = target!;
      return compareVersions(publicOf(v), t) >= 0 && matchesPrefix(v, { epoch: t.epoch, release: t.release.slice(0, -1) });
    }
    case '<=':
      return compareVersions(publicOf(v), target!) <= 0;
    case '>=':
      return compareVersions(publicOf(v), target!) >= 0;
    case '<': {
      const t = target!;
      if (compareVersions(v, t) >= 0) return false;
      // "<2.0" does not admit 2.0's own pre-releases.
      return isPrerelease(t) || !isPrerelease(v) || compareVersions(baseOf(v), baseOf(t)) !== 0;
    }
    case '>': {
      const t = target!;
      if (compareVersions(publicOf(v), t) <= 0) return false;
      // ">2.0" does not admit 2.0's post-releases (unless it names one) or 2.0+local.
      if (t.post === undefined && v.post !== undefined && compareVersions(baseOf(v), baseOf(t)) === 0) return false;
      return !(v.local && compareVersions(publicOf(v), t) === 0);
    }
  }
}

/** The canonical form ("1!2.0rc1.post2.dev3+abc.5"). */
export function formatVersion(v: Version): string {
  let s = `${v.epoch ? `${v.epoch}!` : ''}${v.release.join('.')}`;
  if (v.pre) s += `${v.pre.label}${v.pre.n}`;
  if (v.post !== undefined) s += `.post${v.post}`;
  if (v.dev !== undefined) s += `.dev${v.dev}`;
  return v.local ? `${s}+${v.local.join('.')}` : s;
}

export function satisfiesAll(version: Version | string, specs: Specifier[]): boolean {
  return specs.every((s) => satisfies(version, s));
}

export function formatSpecifiers(specs: Specifier[]): string {
  return specs.map((s) => `${s.op}${s.version}`).join(',');
}
