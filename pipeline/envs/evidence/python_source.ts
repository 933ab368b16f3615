/**
 * Reading a Python file (setup.py, noxfile.py) as text, never running it: its calls (`setup(...)`,
 * `session.install(...)`) with their arguments, and the values of those arguments where they are
 * literals, names assigned literals anywhere in the file (with `+=`, `.append`, `.extend` and
 * `x["k"] = ...` applied in file order), or references to requirement files (`open(...)`,
 * `Path(...).read_text()`, a local helper called with "requirements.txt"). Control flow is not
 * followed: what a branch would add is added. Whatever else is `unknown`, with its line.
 */

type TokenType = 'name' | 'str' | 'num' | 'op' | 'newline';

interface Token {
  type: TokenType;
  value: string;
  line: number;
  /** A string literal that cannot be known without running code (an f-string with fields). */
  dynamic?: true;
}

export type Node =
  | { k: 'str'; v: string; line: number; dynamic?: true }
  | { k: 'num'; v: number; line: number }
  | { k: 'const'; v: boolean | null; line: number }
  | { k: 'list'; items: Node[]; line: number }
  | { k: 'dict'; entries: [Node, Node][]; line: number }
  | { k: 'name'; id: string; line: number }
  | { k: 'attr'; obj: Node; name: string; line: number }
  | { k: 'call'; fn: Node; args: Node[]; kwargs: [string | null, Node][]; line: number }
  | { k: 'binop'; op: string; l: Node; r: Node; line: number }
  | { k: 'index'; obj: Node; index: Node; line: number }
  /** A comprehension, lambda, condition...: only the string literals inside are kept. */
  | { k: 'opaque'; strings: string[]; line: number };

export type Value =
  | { t: 'str'; v: string; line: number }
  | { t: 'num'; v: number; line: number }
  | { t: 'bool'; v: boolean | null; line: number }
  | { t: 'list'; items: Value[]; line: number }
  | { t: 'dict'; entries: Map<string, Value>; line: number }
  /** A requirements file's lines, referred to by path (relative to the file's folder). */
  | { t: 'file'; path: string; line: number }
  | { t: 'unknown'; line: number; why: string };

export interface CallSite {
  /** Dotted callee as written: "setup", "setuptools.setup", "session.install". */
  callee: string;
  args: Node[];
  kwargs: [string | null, Node][];
  line: number;
  /** The top-level function the call is in (a nox session), if any. */
  inDef?: string;
}

const STRING_START = /^([rRbBuUfF]{0,2})('''|"""|'|")/;
const OPERATORS = [
  '**=',
  '//=',
  '>>=',
  '<<=',
  '...',
  '**',
  '//',
  '==',
  '!=',
  '<=',
  '>=',
  '->',
  ':=',
  '+=',
  '-=',
  '*=',
  '/=',
  '%=',
  '&=',
  '|=',
  '^=',
  '>>',
  '<<',
];
const ESCAPES: Record<string, string> = { n: '\n', t: '\t', r: '\r', '\\': '\\', "'": "'", '"': '"', '\n': '' };

function tokenize(text: string): { tokens: Token[]; indents: Map<number, number> } {
  const tokens: Token[] = [];
  /** Indentation of each logical line, by the index of its first token. */
  const indents = new Map<number, number>();
  let i = 0;
  let line = 1;
  let depth = 0;
  let lineStart = true;
  while (i < text.length) {
    const c = text[i];
    if (c === '\n') {
      if (depth === 0 && !lineStart) tokens.push({ type: 'newline', value: '\n', line });
      lineStart = depth === 0 || lineStart;
      line++;
      i++;
      continue;
    }
    if (c === '\\' && text[i + 1] === '\n') {
      line++;
      i += 2;
      continue;
    }
    if (c === ' ' || c === '\t' || c === '\r' || c === '\f') {
      i++;
      continue;
    }
    if (c === '#') {
      while (i < text.length && text[i] !== '\n') i++;
      continue;
    }
    if (lineStart && depth === 0) {
      const bol = text.lastIndexOf('\n', i - 1) + 1;
      indents.set(tokens.length, i - bol);
      lineStart = false;
    }
    const str = STRING_START.exec(text.slice(i, i + 5));
    if (str && (str[1] || c === "'" || c === '"')) {
      const prefix = str[1].toLowerCase();
      const quote = str[2];
      const start = line;
      let j = i + str[0].length;
      let value = '';
      while (j < text.length && !text.startsWith(quote, j)) {
        if (text[j] === '\n') {
          if (quote.length === 1) break;
          line++;
        }
        if (text[j] === '\\') {
          const next = text[j + 1] ?? '';
          if (next === '\n') line++;
          // In a raw string the backslash stays, but still keeps the quote after it from ending the string (r"['\"]").
          value += prefix.includes('r') ? `\\${next}` : (ESCAPES[next] ?? `\\${next}`);
          j += 2;
          continue;
        }
        value += text[j++];
      }
      // An unterminated one-line string ends at the line's end, which is still read as one.
      i = text.startsWith(quote, j) ? j + quote.length : j;
      tokens.push({ type: 'str', value, line: start, ...(prefix.includes('f') && /\{[^{]/.test(value) ? { dynamic: true as const } : {}) });
      continue;
    }
    const word = /^[A-Za-z_][A-Za-z0-9_]*/.exec(text.slice(i, i + 200));
    if (word) {
      tokens.push({ type: 'name', value: word[0], line });
      i += word[0].length;
      continue;
    }
    const num = /^(?:0[xXoObB][0-9a-fA-F_]+|\d[\d_]*(?:\.\d*)?(?:[eE][+-]?\d+)?|\.\d+)[jJ]?/.exec(text.slice(i, i + 100));
    if (num) {
      tokens.push({ type: 'num', value: num[0], line });
      i += num[0].length;
      continue;
    }
    const op = OPERATORS.find((o) => text.startsWith(o, i)) ?? c;
    if ('([{'.includes(op)) depth++;
    if (')]}'.includes(op)) depth = Math.max(0, depth - 1);
    tokens.push({ type: 'op', value: op, line });
    i += op.length;
  }
  tokens.push({ type: 'newline', value: '\n', line });
  return { tokens, indents };
}

const CLOSE: Record<string, string> = { '(': ')', '[': ']', '{': '}' };

/** Expressions over the token list; anything not understood becomes `opaque` and parsing goes on after it. */
class Parser {
  constructor(
    private readonly tokens: Token[],
    public pos: number,
  ) {}

  private peek(offset = 0): Token {
    return this.tokens[Math.min(this.pos + offset, this.tokens.length - 1)];
  }

  private isOp(value: string, offset = 0): boolean {
    const t = this.peek(offset);
    return t.type === 'op' && t.value === value;
  }

  /** Skips to the end of the current expression (a `,` or closing bracket at this depth, or the line's end), keeping its strings. */
  private skipToEnd(line: number, strings: string[] = []): Node {
    let depth = 0;
    for (;;) {
      const t = this.peek();
      if (t.type === 'newline' && depth === 0) break;
      if (t.type === 'op' && depth === 0 && (t.value === ',' || ')]}'.includes(t.value))) break;
      if (t.type === 'op' && '([{'.includes(t.value)) depth++;
      if (t.type === 'op' && ')]}'.includes(t.value)) depth--;
      if (t.type === 'str') strings.push(t.value);
      if (this.pos >= this.tokens.length - 1) break;
      this.pos++;
    }
    return { k: 'opaque', strings, line };
  }

  expression(): Node {
    const line = this.peek().line;
    if (this.peek().type === 'name' && ['lambda', 'not', 'yield', 'await'].includes(this.peek().value)) return this.skipToEnd(line);
    let left = this.term();
    while (this.isOp('+') || this.isOp('/') || this.isOp('%')) {
      const op = this.peek().value;
      this.pos++;
      left = { k: 'binop', op, l: left, r: this.term(), line };
    }
    const t = this.peek();
    // `with open(f) as fh`, `[x for x in ...]`, `a if c else b`: the expression before the keyword is kept.
    const ends =
      t.type === 'newline' ||
      (t.type === 'op' && [',', ')', ']', '}', ':', '='].includes(t.value)) ||
      (t.type === 'name' && ['as', 'for', 'if', 'else'].includes(t.value));
    if (!ends) return this.skipToEnd(line, left.k === 'str' ? [left.v] : left.k === 'opaque' ? left.strings : []);
    return left;
  }

  private sequence(close: string, line: number): { items: Node[]; kwargs: [string | null, Node][]; dictEntries: [Node, Node][] } | Node {
    const items: Node[] = [];
    const kwargs: [string | null, Node][] = [];
    const dictEntries: [Node, Node][] = [];
    while (!this.isOp(close)) {
      if (this.peek().type === 'newline') return { k: 'opaque', strings: [], line };
      if (this.isOp('**') || this.isOp('*')) {
        this.pos++;
        kwargs.push([null, this.expression()]);
      } else if (this.peek().type === 'name' && this.isOp('=', 1)) {
        const key = this.peek().value;
        this.pos += 2;
        kwargs.push([key, this.expression()]);
      } else {
        const item = this.expression();
        if (this.isOp(':')) {
          this.pos++;
          dictEntries.push([item, this.expression()]);
        } else items.push(item);
      }
      if (this.peek().type === 'name' && this.peek().value === 'for') {
        const strings = [...items, ...dictEntries.flat()].flatMap((n) => (n.k === 'str' ? [n.v] : n.k === 'opaque' ? n.strings : []));
        this.skipBracketTail(close, strings);
        return { k: 'opaque', strings, line };
      }
      if (this.isOp(',')) this.pos++;
      else if (!this.isOp(close)) {
        const opaque = this.skipToEnd(line);
        if (!this.isOp(close) && !this.isOp(',')) return opaque;
      }
    }
    this.pos++;
    return { items, kwargs, dictEntries };
  }

  /** Inside a bracket: to its closing one, keeping strings (a comprehension's). */
  private skipBracketTail(close: string, strings: string[]): void {
    let depth = 0;
    while (this.pos < this.tokens.length - 1) {
      const t = this.peek();
      this.pos++;
      if (t.type === 'str') strings.push(t.value);
      if (t.type === 'op' && '([{'.includes(t.value)) depth++;
      else if (t.type === 'op' && ')]}'.includes(t.value)) {
        if (depth === 0 && t.value === close) return;
        depth--;
      }
    }
  }

  private term(): Node {
    const t = this.peek();
    const line = t.line;
    let node: Node;
    if (t.type === 'str') {
      this.pos++;
      let v = t.value;
      let dynamic = t.dynamic;
      while (this.peek().type === 'str') {
        v += this.peek().value;
        dynamic ||= this.peek().dynamic;
        this.pos++;
      }
      node = { k: 'str', v, line, ...(dynamic ? { dynamic } : {}) };
    } else if (t.type === 'num') {
      this.pos++;
      node = { k: 'num', v: Number(t.value.replace(/_/g, '')), line };
    } else if (t.type === 'name') {
      this.pos++;
      node =
        t.value === 'True' || t.value === 'False' || t.value === 'None'
          ? { k: 'const', v: t.value === 'None' ? null : t.value === 'True', line }
          : { k: 'name', id: t.value, line };
    } else if (t.type === 'op' && CLOSE[t.value]) {
      this.pos++;
      const seq = this.sequence(CLOSE[t.value], line);
      if ('k' in seq) return seq;
      if (t.value === '{' && seq.dictEntries.length) node = { k: 'dict', entries: seq.dictEntries, line };
      else if (t.value === '(' && seq.items.length === 1 && !this.tokens[this.pos - 2].value.startsWith(',')) node = seq.items[0];
      else node = { k: 'list', items: seq.items, line };
    } else return this.skipToEnd(line);
    for (;;) {
      if (this.isOp('.') && this.peek(1).type === 'name') {
        node = { k: 'attr', obj: node, name: this.peek(1).value, line };
        this.pos += 2;
      } else if (this.isOp('(')) {
        this.pos++;
        const seq = this.sequence(')', line);
        if ('k' in seq) return seq;
        node = { k: 'call', fn: node, args: seq.items, kwargs: seq.kwargs, line };
      } else if (this.isOp('[')) {
        this.pos++;
        const index = this.expression();
        if (!this.isOp(']')) return this.skipToEnd(line);
        this.pos++;
        node = { k: 'index', obj: node, index, line };
      } else return node;
    }
  }
}

type Statement = { op: 'assign' | 'add' | 'append' | 'extend' | 'setitem'; name: string; key?: Node; value: Node; line: number };

const FILE_REF = /\.(txt|in)$/;
const unknown = (line: number, why: string): Value => ({ t: 'unknown', line, why });

function dotted(node: Node): string | undefined {
  if (node.k === 'name') return node.id;
  if (node.k === 'attr') {
    const obj = dotted(node.obj);
    return obj === undefined ? undefined : `${obj}.${node.name}`;
  }
  return undefined;
}

export class PythonSource {
  private readonly tokens: Token[];
  private readonly statements: Statement[] = [];
  /** Names whose statements are being applied, with their value so far: `x = [a] + x` reads the x before it. */
  private readonly sofar = new Map<string, Value | undefined>();
  private readonly callSites: CallSite[] = [];

  constructor(text: string) {
    const { tokens, indents } = tokenize(text);
    this.tokens = tokens;
    const defs: { indent: number; name: string }[] = [];
    let start = 0;
    for (let i = 0; i < tokens.length; i++) {
      if (tokens[i].type !== 'newline') continue;
      const indent = indents.get(start) ?? 0;
      while (defs.length && defs[defs.length - 1].indent >= indent) defs.pop();
      this.readLine(start, i, defs[0]?.name);
      if (tokens[start]?.value === 'def' || (tokens[start]?.value === 'async' && tokens[start + 1]?.value === 'def')) {
        const name = tokens[start + (tokens[start].value === 'async' ? 2 : 1)]?.value;
        if (name) defs.push({ indent, name });
      }
      start = i + 1;
    }
  }

  /** One logical line [start, end): its statement form and every call in it. */
  private readLine(start: number, end: number, inDef: string | undefined): void {
    const t = this.tokens;
    const at = (i: number) => new Parser(t, i);
    if (t[start]?.type === 'name' && t[start + 1]?.type === 'op') {
      const name = t[start].value;
      const op = t[start + 1].value;
      const valueAt = op === ':' ? t.findIndex((x, j) => j > start + 1 && j < end && x.type === 'op' && x.value === '=') + 1 : start + 2;
      if ((op === '=' || (op === ':' && valueAt > 0)) && !(t[start + 2]?.type === 'op' && t[start + 2].value === '=')) {
        this.statements.push({ op: 'assign', name, value: at(valueAt).expression(), line: t[start].line });
      } else if (op === '+=') this.statements.push({ op: 'add', name, value: at(start + 2).expression(), line: t[start].line });
      else if (op === '.' && ['append', 'extend'].includes(t[start + 2]?.value) && t[start + 3]?.value === '(') {
        this.statements.push({ op: t[start + 2].value as 'append' | 'extend', name, value: at(start + 4).expression(), line: t[start].line });
      } else if (op === '[') {
        const p = at(start + 2);
        const key = p.expression();
        if (t[p.pos]?.value === ']' && t[p.pos + 1]?.value === '=')
          this.statements.push({ op: 'setitem', name, key, value: at(p.pos + 2).expression(), line: t[start].line });
      }
    }
    // `with open("requirements.txt") as f:` binds f.
    if (t[start]?.value === 'with') {
      const p = at(start + 1);
      const value = p.expression();
      if (t[p.pos]?.value === 'as' && t[p.pos + 1]?.type === 'name')
        this.statements.push({ op: 'assign', name: t[p.pos + 1].value, value, line: t[start].line });
    }
    for (let i = start; i < end; i++) {
      if (t[i].type !== 'name' || t[i + 1]?.value !== '(' || (i > 0 && ['def', 'class'].includes(t[i - 1].value))) continue;
      let first = i;
      while (first >= start + 2 && t[first - 1].value === '.' && t[first - 2].type === 'name') first -= 2;
      const node = at(first).expression();
      const calls: Node[] = [];
      const collect = (n: Node) => {
        if (n.k === 'call') {
          calls.push(n);
          collect(n.fn);
        } else if (n.k === 'attr') collect(n.obj);
      };
      collect(node);
      const call = calls.find((c) => c.k === 'call' && dotted(c.fn)?.split('.').pop() === t[i].value);
      if (call?.k === 'call')
        this.callSites.push({ callee: dotted(call.fn)!, args: call.args, kwargs: call.kwargs, line: call.line, ...(inDef ? { inDef } : {}) });
    }
  }

  calls(match: (callee: string) => boolean): CallSite[] {
    return this.callSites.filter((c) => match(c.callee));
  }

  evaluate(node: Node, depth = 0): Value {
    if (depth > 20) return unknown(node.line, 'too deep');
    const ev = (n: Node) => this.evaluate(n, depth + 1);
    switch (node.k) {
      case 'str':
        return node.dynamic ? unknown(node.line, 'an f-string') : { t: 'str', v: node.v, line: node.line };
      case 'num':
        return { t: 'num', v: node.v, line: node.line };
      case 'const':
        return { t: 'bool', v: node.v, line: node.line };
      case 'list':
        return { t: 'list', items: node.items.map(ev), line: node.line };
      case 'dict': {
        const entries = new Map<string, Value>();
        for (const [k, v] of node.entries) {
          const key = ev(k);
          if (key.t === 'str') entries.set(key.v, ev(v));
        }
        return { t: 'dict', entries, line: node.line };
      }
      case 'name':
        return this.variable(node.id, node.line, depth);
      case 'binop':
        return this.binop(node.op, ev(node.l), ev(node.r), node.line);
      case 'index': {
        const obj = ev(node.obj);
        const key = ev(node.index);
        return obj.t === 'dict' && key.t === 'str' ? (obj.entries.get(key.v) ?? unknown(node.line, `no key ${key.v}`)) : unknown(node.line, 'an index');
      }
      case 'call':
        return this.call(node, depth);
      case 'attr':
        return unknown(node.line, `an attribute (${dotted(node) ?? node.name})`);
      case 'opaque': {
        const files = node.strings.filter((s) => FILE_REF.test(s));
        return files.length === 1 ? { t: 'file', path: files[0], line: node.line } : unknown(node.line, 'an expression that needs running');
      }
    }
  }

  private variable(name: string, line: number, depth: number): Value {
    if (this.sofar.has(name)) return this.sofar.get(name) ?? unknown(line, `${name} is read before it is assigned`);
    let value: Value | undefined;
    for (const s of this.statements) {
      if (s.name !== name) continue;
      this.sofar.set(name, value);
      let v: Value;
      try {
        v = this.evaluate(s.value, depth + 1);
      } finally {
        this.sofar.delete(name);
      }
      if (s.op === 'assign') value = v;
      else if (s.op === 'add') value = value ? this.binop('+', value, v, s.line) : v;
      else if (s.op === 'append' && value?.t === 'list') value = { ...value, items: [...value.items, v] };
      else if (s.op === 'extend' && value?.t === 'list') value = this.binop('+', value, v, s.line);
      else if (s.op === 'setitem' && value?.t === 'dict' && s.key) {
        const key = this.evaluate(s.key, depth + 1);
        if (key.t === 'str') value = { ...value, entries: new Map(value.entries).set(key.v, v) };
      }
    }
    return value ?? unknown(line, `${name} is not assigned in the file`);
  }

  private binop(op: string, l: Value, r: Value, line: number): Value {
    if (op === '+' && l.t === 'list' && r.t === 'list') return { t: 'list', items: [...l.items, ...r.items], line };
    if (op === '+' && l.t === 'list' && r.t === 'file') return { t: 'list', items: [...l.items, r], line };
    if (op === '+' && l.t === 'file' && r.t === 'list') return { t: 'list', items: [l, ...r.items], line };
    if (op === '+' && l.t === 'str' && r.t === 'str') return { t: 'str', v: l.v + r.v, line };
    // Path(__file__).parent / "requirements.txt": the unknown left side is the file's own folder.
    if (op === '/' && r.t === 'str') return l.t === 'str' ? { t: 'str', v: `${l.v}/${r.v}`, line } : r;
    return unknown(line, `"${op}" of ${l.t} and ${r.t}`);
  }

  private call(node: Extract<Node, { k: 'call' }>, depth: number): Value {
    const args = node.args.map((a) => this.evaluate(a, depth + 1));
    const fn = node.fn;
    const name = dotted(fn) ?? (fn.k === 'attr' ? fn.name : '');
    const last = name.split('.').pop() ?? '';
    if (fn.k === 'attr' && ['read', 'read_text', 'splitlines', 'split', 'strip', 'readlines', 'rstrip', 'lstrip'].includes(fn.name)) {
      const obj = this.evaluate(fn.obj, depth + 1);
      if (obj.t === 'file') return obj;
      if (obj.t === 'str' && fn.name === 'read_text') return { t: 'file', path: obj.v, line: node.line };
      if (obj.t === 'str' && fn.name === 'split' && args[0]?.t === 'str')
        return { t: 'list', items: obj.v.split(args[0].v).map((v) => ({ t: 'str', v, line: obj.line })), line: node.line };
      return unknown(node.line, `.${fn.name}() of ${obj.t}`);
    }
    // ">=".join(["torch", torch_min]): a requirement put together from literals.
    if (fn.k === 'attr' && fn.name === 'join' && args[0]?.t === 'list') {
      const sep = this.evaluate(fn.obj, depth + 1);
      const parts = args[0].items;
      if (sep.t === 'str' && parts.every((p) => p.t === 'str'))
        return { t: 'str', v: parts.map((p) => (p as Extract<Value, { t: 'str' }>).v).join(sep.v), line: node.line };
    }
    if (['list', 'sorted', 'tuple', 'set'].includes(name) && args.length === 1) return args[0];
    if (name === 'dict') {
      const entries = new Map<string, Value>();
      for (const [k, v] of node.kwargs) if (k) entries.set(k, this.evaluate(v, depth + 1));
      return { t: 'dict', entries, line: node.line };
    }
    if (last === 'join' && name.includes('path')) {
      const parts = args.filter((a): a is Extract<Value, { t: 'str' }> => a.t === 'str').map((a) => a.v);
      return parts.length ? { t: 'str', v: parts.join('/'), line: node.line } : unknown(node.line, 'a path join');
    }
    if (last === 'Path' || last === 'PurePath') return args.find((a) => a.t === 'str') ?? unknown(node.line, 'a path');
    // open("requirements.txt"), or a local helper read_requirements("requirements/base.txt").
    const file = args.find((a) => a.t === 'file' || (a.t === 'str' && (last === 'open' || FILE_REF.test(a.v))));
    if (file?.t === 'str') return { t: 'file', path: file.v, line: node.line };
    if (file?.t === 'file') return file;
    return unknown(node.line, `a call of ${name || 'an expression'}()`);
  }
}
