"""Turn a mutated AST back into source with the smallest text change.

The original and mutated module trees are compared node by node; the
difference is rendered as a list of text edits, finest first (replace one
expression, one statement header, a run of statements, ...), falling back to
coarser edits (the whole statement, the whole function).  Every candidate is
verified: the edited file must parse to exactly the mutated tree (``ast.dump``
equality) and compile.  Text outside the edits is never touched, so comments
and formatting elsewhere survive byte for byte.

Needs ``ast.unparse`` (Python 3.9+).
"""

import ast
import io
import re
import tokenize

from .source import is_stmt_list

BLOCK_FIELDS = ("body", "orelse", "finalbody", "handlers", "cases")
COMPOUND = tuple(
    getattr(ast, n) for n in ("FunctionDef", "AsyncFunctionDef", "ClassDef", "If", "For", "AsyncFor", "While",
                              "With", "AsyncWith") if hasattr(ast, n))


class RenderError(Exception):
    pass


def have_unparse():
    return hasattr(ast, "unparse")


class _Text:
    def __init__(self, text):
        self.text = text
        self.lines = text.splitlines(keepends=True)
        if not self.lines or self.lines[-1].endswith(("\n", "\r")):
            self.lines.append("")
        self.starts = [0]
        for line in self.lines:
            self.starts.append(self.starts[-1] + len(line))

    def line(self, lineno):
        return self.lines[lineno - 1]

    def offset(self, lineno, byte_col):
        """Absolute character offset of (1-based line, UTF-8 byte column)."""
        line = self.lines[lineno - 1]
        char_col = len(line.encode("utf-8")[:byte_col].decode("utf-8", "replace"))
        return self.starts[lineno - 1] + char_col

    def newline(self, lineno):
        line = self.lines[lineno - 1]
        if line.endswith("\r\n"):
            return "\r\n"
        if line.endswith("\r"):
            return "\r"
        return "\n"

    def line_of(self, offset):
        lo, hi = 0, len(self.starts) - 1
        while lo < hi - 1:
            mid = (lo + hi) // 2
            if self.starts[mid] <= offset:
                lo = mid
            else:
                hi = mid
        return lo + 1


def _continuation_rows(text):
    """0-based rows of ``text`` that start inside a multi-line token (a string)."""
    rows = set()
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.end[0] > tok.start[0] and tok.type != tokenize.NL and tok.type != tokenize.NEWLINE:
                rows.update(range(tok.start[0], tok.end[0]))  # rows start[0]+1..end[0], 0-based
    except (tokenize.TokenError, IndentationError, SyntaxError):
        pass
    return rows


def _indent(text, indent, newline):
    """Prefix every line but the first with ``indent`` (not lines inside strings)."""
    lines = text.split("\n")
    if len(lines) == 1:
        return text
    if indent is None:
        return None
    inside = _continuation_rows(text + "\n")
    out = [lines[0]]
    for k, line in enumerate(lines[1:], start=1):
        out.append(line if (k in inside or not line) else indent + line)
    return newline.join(out)


class Renderer:
    def __init__(self, source, focus=None):
        self.src = _Text(source)
        self._dumps = {}
        self.focus = focus  # original subtree whose text may be reused for unchanged expressions
        self._index = None
        self._stmt_index = None

    def dump(self, node):
        key = id(node)
        d = self._dumps.get(key)
        if d is None:
            d = self._dumps[key] = ast.dump(node)
        return d

    def dump_list(self, nodes):
        return [self.dump(n) if isinstance(n, ast.AST) else repr(n) for n in nodes]

    # ------------------------------------------------------------ edit kinds

    def _stmt_start(self, node):
        decorators = getattr(node, "decorator_list", None) or []
        if decorators:
            first = min(decorators, key=lambda d: (d.lineno, d.col_offset))
            off = self.src.offset(first.lineno, first.col_offset)
            text = self.src.text
            k = off - 1
            while k >= 0 and text[k] in " \t":
                k -= 1
            if k < 0 or text[k] != "@":
                return None
            return k
        return self.src.offset(node.lineno, node.col_offset)

    def _prefix(self, off):
        lineno = self.src.line_of(off)
        return lineno, self.src.text[self.src.starts[lineno - 1]:off]

    def _elif(self, start, text):
        if self.src.text.startswith("elif", start) and text.startswith("if"):
            return "el" + text
        return text

    def segment(self, node):
        if getattr(node, "end_col_offset", None) is None:
            return None
        return self.src.offset(node.lineno, node.col_offset), self.src.offset(node.end_lineno, node.end_col_offset)

    def _original_text(self, m):
        """Original source text of an expression equal to ``m`` in the focus region, if any."""
        if self._index is None:
            self._index = {}
            if self.focus is not None:
                from .source import preorder
                for node in preorder(self.focus):
                    if isinstance(node, ast.expr) and getattr(node, "end_col_offset", None) is not None:
                        self._index.setdefault(ast.dump(node), node)
        node = self._index.get(self.dump(m))
        if node is None:
            return None
        start, end = self.segment(node)
        return self.src.text[start:end]

    def _texts(self, o, m):
        """Candidate renderings of expression ``m`` (replacing ``o``), best first."""
        texts = []
        same = self._original_text(m)
        if same is not None:
            texts.append(same)
        if isinstance(m, ast.UnaryOp):
            operand = self._original_text(m.operand)
            if operand is not None:
                sym = {ast.Not: "not ", ast.USub: "-", ast.UAdd: "+", ast.Invert: "~"}[type(m.op)]
                texts.append(sym + operand)
                texts.append(sym + "(" + operand + ")")
        if isinstance(o, ast.Constant) and isinstance(m, ast.Constant) and isinstance(m.value, str) \
                and not isinstance(m.value, bool):
            start, _ = self.segment(o)
            r = repr(m.value)
            if self.src.text.startswith('"', start) and r.startswith("'") and '"' not in m.value \
                    and "\\" not in r:
                texts.append('"' + r[1:-1] + '"')
        text = ast.unparse(m)
        if "\n" not in text:
            texts.append(text)
        return texts

    def expr_edits(self, o, m):
        seg = self.segment(o)
        if seg is None:
            return []
        start, end = seg
        out = []
        for text in self._texts(o, m):
            out.append([(start, end, text)])
            if "\n" not in text:
                out.append([(start, end, "(" + text + ")")])
        return out

    OP_PATTERNS = {
        "is not": r"\bis\s+not\b", "not in": r"\bnot\s+in\b",
        "and": r"\band\b", "or": r"\bor\b", "is": r"\bis\b(?!\s+not\b)", "in": r"(?<!not )\bin\b",
    }

    def _op_in_gap(self, left, right, old_sym, new_sym, aug=False):
        """Edit replacing the operator between two nodes, keeping the text around it."""
        a, b = self.segment(left), self.segment(right)
        if a is None or b is None:
            return None
        gap = self.src.text[a[1]:b[0]]
        if "#" in gap:
            return None
        sym = old_sym + ("=" if aug else "")
        pat = self.OP_PATTERNS.get(old_sym)
        if pat is None:
            pat = r"(?<![-+*/%@<>=!&|^~])" + re.escape(sym) + r"(?![<>=*/])"
        found = list(re.finditer(pat, gap))
        if len(found) != 1:
            return None
        mt = found[0]
        return (a[1] + mt.start(), a[1] + mt.end(), new_sym + ("=" if aug else ""))

    def op_edit(self, o, m):
        """Only operators changed (BinOp/AugAssign/BoolOp/Compare): swap the operator tokens."""
        from .operators import OP_SYMBOLS
        sym = lambda op: OP_SYMBOLS.get(type(op))  # noqa: E731
        if type(o) is not type(m):
            return None
        edits = []
        if isinstance(o, ast.BinOp):
            if self.dump(o.left) != self.dump(m.left) or self.dump(o.right) != self.dump(m.right):
                return None
            edits.append(self._op_in_gap(o.left, o.right, sym(o.op), sym(m.op)))
        elif isinstance(o, ast.AugAssign):
            if self.dump(o.target) != self.dump(m.target) or self.dump(o.value) != self.dump(m.value):
                return None
            edits.append(self._op_in_gap(o.target, o.value, sym(o.op), sym(m.op), aug=True))
        elif isinstance(o, ast.BoolOp):
            if self.dump_list(o.values) != self.dump_list(m.values):
                return None
            for left, right in zip(o.values, o.values[1:]):
                edits.append(self._op_in_gap(left, right, sym(o.op), sym(m.op)))
        elif isinstance(o, ast.Compare):
            if self.dump(o.left) != self.dump(m.left) or len(o.ops) != len(m.ops) \
                    or self.dump_list(o.comparators) != self.dump_list(m.comparators):
                return None
            operands = [o.left] + list(o.comparators)
            for k, (a_op, b_op) in enumerate(zip(o.ops, m.ops)):
                if type(a_op) is not type(b_op):
                    edits.append(self._op_in_gap(operands[k], operands[k + 1], sym(a_op), sym(b_op)))
        else:
            return None
        if not edits or any(e is None for e in edits):
            return None
        return edits

    def param_edit(self, o, m):
        """One parameter removed from a def: delete its text (and default) with one comma."""
        def params(args):
            out = []
            posonly = list(getattr(args, "posonlyargs", []))
            positional = posonly + list(args.args)
            nd = len(positional) - len(args.defaults)
            for i, a in enumerate(positional):
                out.append(("pos", a, args.defaults[i - nd] if i >= nd else None))
            if args.vararg is not None:
                out.append(("var", args.vararg, None))
            for a, d in zip(args.kwonlyargs, args.kw_defaults):
                out.append(("kw", a, d))
            if args.kwarg is not None:
                out.append(("kwarg", args.kwarg, None))
            return out
        po, pm = params(o), params(m)
        if len(po) != len(pm) + 1:
            return None
        names_m = [(k, a.arg) for k, a, _ in pm]
        gone = [i for i in range(len(po)) if [(k, a.arg) for k, a, _ in po[:i] + po[i + 1:]] == names_m]
        if not gone:
            return None
        kind, arg, default = po[gone[0]]
        seg = self.segment(arg)
        if seg is None:
            return None
        start, end = seg
        if default is not None:
            dseg = self.segment(default)
            if dseg is None:
                return None
            end = dseg[1]
        text = self.src.text
        if kind == "var" and text[start - 1:start] == "*":
            start -= 1
        elif kind == "kwarg" and text[start - 2:start] == "**":
            start -= 2
        k = end
        while k < len(text) and text[k] in " \t":
            k += 1
        if k < len(text) and text[k] == ",":
            k += 1
            while k < len(text) and text[k] in " \t":
                k += 1
            return [(start, k, "")]
        j = start
        while j > 0 and text[j - 1] in " \t\r\n":
            j -= 1
        if j > 0 and text[j - 1] == ",":
            return [(j - 1, end, "")]
        return None

    def stmt_edit(self, o, m):
        if getattr(o, "end_col_offset", None) is None:
            return None
        start = self._stmt_start(o)
        if start is None:
            return None
        end = self.src.offset(o.end_lineno, o.end_col_offset)
        lineno, prefix = self._prefix(start)
        indent = prefix if not prefix.strip() else None
        reused = self._original_stmt_text(m, indent)
        if reused is not None:
            return [(start, end, self._elif(start, reused))]
        text = _indent(self._elif(start, ast.unparse(m)), indent, self.src.newline(lineno))
        if text is None:
            return None
        return [(start, end, text)]

    def range_edit(self, old, new):
        """Alternatives (lists of edits) replacing the statement run ``old`` by ``new``."""
        start = self._stmt_start(old[0])
        if start is None:
            return []
        last = old[-1]
        end = self.src.offset(last.end_lineno, last.end_col_offset)
        lineno, prefix = self._prefix(start)
        if not new:
            # Delete whole lines: the statements must own them.
            rest = self.src.line(last.end_lineno)
            rest_after = self.src.text[end:self.src.starts[last.end_lineno - 1] + len(rest)]
            tail = rest_after.strip()
            if prefix.strip() or (tail and not tail.startswith("#")):
                return []
            return [[(self.src.starts[lineno - 1], self.src.starts[last.end_lineno], "")]]
        indent = prefix if not prefix.strip() else None
        nl = self.src.newline(lineno)
        out = []
        reused = [self._original_stmt_text(s, indent) for s in new]
        if all(t is not None for t in reused):
            text = self._elif(start, (nl + (indent or "")).join(reused))
            out.append([(start, end, text)])
        text = "\n".join(ast.unparse(s) for s in new)
        text = _indent(self._elif(start, text), indent, nl)
        if text is not None:
            out.append([(start, end, text)])
        return out

    def _original_stmt_text(self, m, indent):
        """Original text of a statement equal to ``m`` (in the focus region), re-indented to ``indent``."""
        if indent is None:
            return None
        if self._stmt_index is None:
            self._stmt_index = {}
            if self.focus is not None:
                from .source import preorder
                for node in preorder(self.focus):
                    if isinstance(node, ast.stmt):
                        self._stmt_index.setdefault(ast.dump(node), node)
        node = self._stmt_index.get(self.dump(m))
        if node is None:
            return None
        start = self._stmt_start(node)
        if start is None:
            return None
        end = self.src.offset(node.end_lineno, node.end_col_offset)
        _, old_indent = self._prefix(start)
        if old_indent.strip():
            return None
        lines = self.src.text[start:end].splitlines(keepends=True)
        out = [lines[0]]
        for line in lines[1:]:
            if line.startswith(old_indent):
                line = indent + line[len(old_indent):]
            elif line.strip():
                return None
            out.append(line)
        return "".join(out)

    def header_edit(self, o, m):
        """Re-render only the header (``def f(...):``, ``if x:``) of a compound statement."""
        if not isinstance(o, COMPOUND) or type(o) is not type(m):
            return None
        for field in BLOCK_FIELDS + ("decorator_list",):
            a, b = getattr(o, field, None), getattr(m, field, None)
            if isinstance(a, list) and self.dump_list(a) != self.dump_list(b):
                return None
        head = type(m)(**{f: getattr(m, f, None) for f in m._fields})
        head.lineno = getattr(m, "lineno", None) or o.lineno  # unparse looks up type comments by line
        head.body = [ast.Pass()]
        for field in ("orelse", "finalbody", "handlers", "decorator_list"):
            if hasattr(head, field):
                setattr(head, field, [])
        text = ast.unparse(head)
        lines = text.split("\n")
        if len(lines) < 2 or lines[-1].strip() != "pass":
            return None
        header = "\n".join(lines[:-1])
        if not header.endswith(":"):
            return None
        start = self.src.offset(o.lineno, o.col_offset)
        end = self._header_end(start, self.src.offset(o.end_lineno, o.end_col_offset))
        if end is None:
            return None
        lineno, prefix = self._prefix(start)
        indent = prefix if not prefix.strip() else None
        header = _indent(self._elif(start, header), indent, self.src.newline(lineno))
        if header is None:
            return None
        return [(start, end, header)]

    def _header_end(self, start, stop):
        chunk = self.src.text[start:stop]
        depth = 0
        try:
            for tok in tokenize.generate_tokens(io.StringIO(chunk).readline):
                if tok.type != tokenize.OP:
                    continue
                if tok.string in "([{":
                    depth += 1
                elif tok.string in ")]}":
                    depth -= 1
                elif tok.string == ":" and depth == 0:
                    row, col = tok.end
                    if row == 1:
                        return start + col
                    base_line = self.src.line_of(start)
                    return self.src.starts[base_line + row - 2] + col
        except (tokenize.TokenError, IndentationError, SyntaxError):
            return None
        return None

    # ------------------------------------------------------------ the diff

    def alternatives(self, o, m):
        """Lists of edits that turn ``o`` into ``m``, finest first."""
        out = []
        op = self.op_edit(o, m)
        if op:
            out.append(op)
        if isinstance(o, ast.arguments):
            pe = self.param_edit(o, m)
            if pe:
                out.append(pe)
        if type(o) is type(m):
            parts = []
            ok = True
            for field in o._fields:
                a, b = getattr(o, field, None), getattr(m, field, None)
                if isinstance(a, list) and isinstance(b, list):
                    if is_stmt_list(a) or is_stmt_list(b):
                        if self.dump_list(a) != self.dump_list(b):
                            r = self.stmts_alternatives(a, b)
                            if r:
                                parts.append(r)
                            else:
                                ok = False
                    elif len(a) != len(b):
                        ok = False
                    else:
                        for x, y in zip(a, b):
                            if isinstance(x, ast.AST) and isinstance(y, ast.AST):
                                if self.dump(x) != self.dump(y):
                                    r = self.alternatives(x, y)
                                    if r:
                                        parts.append(r)
                                    else:
                                        ok = False
                            elif x != y:
                                ok = False
                elif isinstance(a, ast.AST) and isinstance(b, ast.AST):
                    if self.dump(a) != self.dump(b):
                        r = self.alternatives(a, b)
                        if r:
                            parts.append(r)
                        else:
                            ok = False
                elif isinstance(a, ast.AST) or isinstance(b, ast.AST):
                    ok = False
                elif a != b:
                    ok = False
            if ok and parts:
                out.extend(_combine(parts))
            h = self.header_edit(o, m)
            if h:
                out.append(h)
        if isinstance(o, ast.expr):
            out.extend(self.expr_edits(o, m))
        elif isinstance(o, (ast.stmt, ast.excepthandler)) or (
                getattr(o, "end_col_offset", None) is not None and not isinstance(o, ast.expr)):
            e = self.stmt_edit(o, m)
            if e:
                out.append(e)
        return out

    def stmts_alternatives(self, a, b):
        da, db = self.dump_list(a), self.dump_list(b)
        p = 0
        while p < min(len(a), len(b)) and da[p] == db[p]:
            p += 1
        s = 0
        while s < min(len(a), len(b)) - p and da[len(a) - 1 - s] == db[len(b) - 1 - s]:
            s += 1
        old, new = a[p:len(a) - s], b[p:len(b) - s]
        out = []
        if len(old) == 1 and len(new) == 1:
            out.extend(self.alternatives(old[0], new[0]))
        elif old and len(old) == len(new):
            parts = []
            for x, y in zip(old, new):
                if self.dump(x) != self.dump(y):
                    parts.append(self.alternatives(x, y))
            if parts and all(parts):
                out.extend(_combine(parts))
        if old:
            out.extend(self.range_edit(old, new) or [])
        return out


def _combine(parts):
    """Alternatives for several independent differences: level k uses each part's k-th alternative."""
    if len(parts) == 1:
        return list(parts[0])
    depth = max(len(p) for p in parts)
    return [[e for p in parts for e in p[min(k, len(p) - 1)]] for k in range(depth)]


def apply_edits(text, edits):
    edits = sorted(edits, key=lambda e: (e[0], e[1]))
    for (s1, e1, _), (s2, _e2, _t) in zip(edits, edits[1:]):
        if s2 < e1:
            raise RenderError("overlapping edits")
    for start, end, new in reversed(edits):
        text = text[:start] + new + text[end:]
    return text


def render(source, original_tree, mutated_tree, filename="<mutant>", focus=None):
    """Return (new_source, edits) for the mutated tree, or raise RenderError."""
    if not have_unparse():
        raise RenderError("rendering a mutant needs ast.unparse (Python 3.9+)")
    r = Renderer(source, focus)
    target = ast.dump(mutated_tree)
    if ast.dump(original_tree) == target:
        raise RenderError("mutation left the AST unchanged")
    for edits in r.alternatives(original_tree, mutated_tree):
        try:
            new_source = apply_edits(source, edits)
        except RenderError:
            continue
        try:
            new_tree = ast.parse(new_source)
        except (SyntaxError, ValueError):
            continue
        if ast.dump(new_tree) != target:
            continue
        return new_source, sorted(edits)
    raise RenderError("could not render the mutation as a source edit")
