/**
 * PEP 508 environment markers ("python_version < '3.11' and sys_platform == 'linux'"): parsed once,
 * evaluated for each candidate interpreter. Our interpreters are CPython on x86_64 Linux; only the
 * Python version differs between them.
 */
import { normalizeName } from './names.js';
import { parseVersion, type SpecifierOp, satisfies } from './pep440.js';

type MarkerValue = { variable: string } | { literal: string };

interface Comparison {
  kind: 'compare';
  left: MarkerValue;
  op: MarkerOp;
  right: MarkerValue;
}

export type Marker = { kind: 'and' | 'or'; left: Marker; right: Marker } | Comparison;

type MarkerOp = SpecifierOp | 'in' | 'not in';

export interface MarkerEnv {
  os_name: string;
  sys_platform: string;
  platform_machine: string;
  platform_python_implementation: string;
  platform_release: string;
  platform_system: string;
  platform_version: string;
  python_version: string;
  python_full_version: string;
  implementation_name: string;
  implementation_version: string;
  extra: string;
}

export class MarkerError extends Error {}

/** Legacy dotted spellings `packaging` still accepts. */
const ALIASES: Record<string, keyof MarkerEnv> = {
  'os.name': 'os_name',
  'sys.platform': 'sys_platform',
  'platform.version': 'platform_version',
  'platform.machine': 'platform_machine',
  'platform.python_implementation': 'platform_python_implementation',
  python_implementation: 'platform_python_implementation',
};

const VARIABLES = new Set<string>([
  'os_name',
  'sys_platform',
  'platform_machine',
  'platform_python_implementation',
  'platform_release',
  'platform_system',
  'platform_version',
  'python_version',
  'python_full_version',
  'implementation_name',
  'implementation_version',
  'extra',
]);

const TOKEN = /\s*(?:(\()|(\))|'([^']*)'|"([^"]*)"|(===|==|!=|<=|>=|~=|<|>)|(not\s+in\b)|([A-Za-z_][A-Za-z0-9_.]*))/y;

type Token = { t: '(' | ')' | 'str' | 'op' | 'name'; v: string };

function tokenize(text: string): Token[] {
  const out: Token[] = [];
  TOKEN.lastIndex = 0;
  while (TOKEN.lastIndex < text.length) {
    if (/^\s*$/.test(text.slice(TOKEN.lastIndex))) break;
    const at = TOKEN.lastIndex;
    const m = TOKEN.exec(text);
    if (!m) throw new MarkerError(`cannot read marker at ${JSON.stringify(text.slice(at))}`);
    if (m[1]) out.push({ t: '(', v: '(' });
    else if (m[2]) out.push({ t: ')', v: ')' });
    else if (m[3] !== undefined || m[4] !== undefined) out.push({ t: 'str', v: m[3] ?? m[4] });
    else if (m[5]) out.push({ t: 'op', v: m[5] });
    else if (m[6]) out.push({ t: 'op', v: 'not in' });
    else out.push(m[7] === 'in' ? { t: 'op', v: 'in' } : { t: 'name', v: m[7] });
  }
  return out;
}

export function parseMarker(text: string): Marker {
  const tokens = tokenize(text);
  let i = 0;
  const value = (): MarkerValue => {
    const tok = tokens[i++];
    if (tok?.t === 'str') return { literal: tok.v };
    if (tok?.t === 'name') {
      const variable = ALIASES[tok.v] ?? tok.v;
      if (!VARIABLES.has(variable)) throw new MarkerError(`unknown marker variable ${JSON.stringify(tok.v)}`);
      return { variable };
    }
    throw new MarkerError(`expected a marker variable or a quoted string in ${JSON.stringify(text)}`);
  };
  const expr = (): Marker => {
    if (tokens[i]?.t === '(') {
      i++;
      const inner = or();
      if (tokens[i++]?.t !== ')') throw new MarkerError(`unbalanced parentheses in ${JSON.stringify(text)}`);
      return inner;
    }
    const left = value();
    const op = tokens[i++];
    if (op?.t !== 'op') throw new MarkerError(`expected a comparison in ${JSON.stringify(text)}`);
    return { kind: 'compare', left, op: op.v as MarkerOp, right: value() };
  };
  const chain = (word: 'and' | 'or', next: () => Marker) => (): Marker => {
    let left = next();
    while (tokens[i]?.t === 'name' && tokens[i].v === word) {
      i++;
      left = { kind: word, left, right: next() };
    }
    return left;
  };
  const and = chain('and', expr);
  const or = chain('or', and);
  const marker = or();
  if (i !== tokens.length) throw new MarkerError(`unexpected ${JSON.stringify(tokens[i].v)} in marker ${JSON.stringify(text)}`);
  return marker;
}

/** CPython on x86_64 Linux at `pythonFullVersion` ("3.11.2"). */
export function linuxMarkerEnv(pythonFullVersion: string, extra = ''): MarkerEnv {
  return {
    os_name: 'posix',
    sys_platform: 'linux',
    platform_machine: 'x86_64',
    platform_python_implementation: 'CPython',
    platform_release: '',
    platform_system: 'Linux',
    platform_version: '',
    python_version: pythonFullVersion.split('.').slice(0, 2).join('.'),
    python_full_version: pythonFullVersion,
    implementation_name: 'cpython',
    implementation_version: pythonFullVersion,
    extra,
  };
}

function compareStrings(a: string, op: MarkerOp, b: string): boolean {
  switch (op) {
    case 'in':
      return b.includes(a);
    case 'not in':
      return !b.includes(a);
    case '==':
    case '===':
      return a === b;
    case '!=':
      return a !== b;
    case '<':
      return a < b;
    case '<=':
      return a <= b;
    case '>':
      return a > b;
    case '>=':
      return a >= b;
    case '~=':
      throw new MarkerError(`"~=" needs versions: ${JSON.stringify(a)} ~= ${JSON.stringify(b)}`);
  }
}

function compare(m: Comparison, env: MarkerEnv): boolean {
  const read = (v: MarkerValue) => ('literal' in v ? v.literal : env[v.variable as keyof MarkerEnv]);
  let [a, b] = [read(m.left), read(m.right)];
  const isExtra = (v: MarkerValue) => 'variable' in v && v.variable === 'extra';
  if (isExtra(m.left) || isExtra(m.right)) [a, b] = [normalizeName(a), normalizeName(b)];
  else if (m.op !== 'in' && m.op !== 'not in') {
    // Like `packaging`: a version comparison when the right side is a version, else Python's string comparison.
    try {
      parseVersion(a);
      return satisfies(a, { op: m.op, version: b.trim() });
    } catch {
      // not versions
    }
  }
  return compareStrings(a, m.op, b);
}

export function evaluateMarker(m: Marker, env: MarkerEnv): boolean {
  switch (m.kind) {
    case 'and':
      return evaluateMarker(m.left, env) && evaluateMarker(m.right, env);
    case 'or':
      return evaluateMarker(m.left, env) || evaluateMarker(m.right, env);
    case 'compare':
      return compare(m, env);
  }
}
