"""Where functions live in their files: qualname, def line and source range, from the AST.

A code object is looked up by (co_firstlineno, co_name); co_firstlineno is the first decorator's
line for a decorated function (Python 3.8+), the ``def`` line otherwise. On 3.11+ the qualname
comes from ``co_qualname``; below, from this index (so both agree on every version).
"""
import ast
import linecache


class FuncInfo(object):
    __slots__ = ("qualname", "def_line", "start_line", "end_line", "is_def")

    def __init__(self, qualname, def_line, start_line, end_line, is_def):
        self.qualname = qualname
        self.def_line = def_line      # the line holding ``def``
        self.start_line = start_line  # first decorator, or the def line
        self.end_line = end_line      # last line of the body
        self.is_def = is_def          # a def / async def (not a lambda, class body, module)

    def __repr__(self):
        return "FuncInfo(%r, %d, %d, %d)" % (self.qualname, self.def_line, self.start_line, self.end_line)


class _Indexer(ast.NodeVisitor):
    def __init__(self):
        self.found = {}
        self.stack = []  # qualname parts

    def _prefix(self):
        return ".".join(self.stack)

    def _qual(self, name):
        prefix = self._prefix()
        return prefix + "." + name if prefix else name

    def _func(self, node, name, is_def):
        decos = [d.lineno for d in getattr(node, "decorator_list", [])]
        start = min(decos + [node.lineno])
        end = getattr(node, "end_lineno", None) or node.lineno
        qual = self._qual(name)
        key = (start, name)
        if key not in self.found:
            self.found[key] = FuncInfo(qual, node.lineno, start, end, is_def)
        return qual

    def visit_FunctionDef(self, node):
        for d in node.decorator_list:
            self.visit(d)
        self.visit(node.args)
        qual = self._func(node, node.name, True)
        self.stack.append(node.name)
        self.stack.append("<locals>")
        for stmt in node.body:
            self.visit(stmt)
        self.stack.pop()
        self.stack.pop()
        del qual

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Lambda(self, node):
        self.visit(node.args)
        self._func(node, "<lambda>", False)
        self.stack.append("<lambda>")
        self.stack.append("<locals>")
        self.visit(node.body)
        self.stack.pop()
        self.stack.pop()

    def visit_ClassDef(self, node):
        for d in node.decorator_list:
            self.visit(d)
        for b in node.bases:
            self.visit(b)
        self._func(node, node.name, False)
        self.stack.append(node.name)
        for stmt in node.body:
            self.visit(stmt)
        self.stack.pop()

    def _comp(self, node, name):
        # the first iterable is evaluated outside the comprehension's scope
        gens = node.generators
        self.visit(gens[0].iter)
        self._func(node, name, False)
        self.stack.append(name)
        self.stack.append("<locals>")
        for i, g in enumerate(gens):
            self.visit(g.target)
            if i:
                self.visit(g.iter)
            for cond in g.ifs:
                self.visit(cond)
        for attr in ("elt", "key", "value"):
            sub = getattr(node, attr, None)
            if sub is not None:
                self.visit(sub)
        self.stack.pop()
        self.stack.pop()

    def visit_ListComp(self, node):
        self._comp(node, "<listcomp>")

    def visit_SetComp(self, node):
        self._comp(node, "<setcomp>")

    def visit_DictComp(self, node):
        self._comp(node, "<dictcomp>")

    def visit_GeneratorExp(self, node):
        self._comp(node, "<genexpr>")


class SourceIndex(object):
    """Per-file AST index; ``lookup(code)`` -> FuncInfo or None."""

    def __init__(self):
        self._files = {}
        self._codes = {}
        self._lines = {}
        # episodes.EpisodeBuilder's context JSON by (entry FuncInfo, callee FuncInfos...): a
        # FuncInfo is one function of one file, indexed once, so the key names the text for as long
        # as the index lives, and the tests of one run share what they built
        self.contexts = {}
        # the same run's sources of those contexts JSON-escaped, by (file, start line, is the entry)
        self.escaped = {}

    def _index(self, filename):
        idx = self._files.get(filename)
        if idx is None:
            idx = {}
            try:
                text = "".join(linecache.getlines(filename))
                if text:
                    v = _Indexer()
                    v.visit(ast.parse(text, filename))
                    idx = v.found
            except Exception:
                idx = {}
            self._files[filename] = idx
        return idx

    def lookup(self, code):
        try:
            return self._codes[code]
        except KeyError:
            pass
        info = self._index(code.co_filename).get((code.co_firstlineno, code.co_name))
        self._codes[code] = info
        return info

    def at(self, filename, start_line, name):
        """FuncInfo of the function called ``name`` whose code starts at ``start_line``."""
        return self._index(filename).get((start_line, name))

    def line(self, filename, lineno):
        """The source line with its trailing newline ('' when unknown)."""
        lines = self._lines.get(filename)
        if lines is None:
            lines = self._lines[filename] = [
                line if line.endswith("\n") else line + "\n" for line in linecache.getlines(filename)]
        return lines[lineno - 1] if 0 < lineno <= len(lines) else ""

    def qualname(self, code):
        q = getattr(code, "co_qualname", None)
        if q is not None:
            return q
        info = self.lookup(code)
        return info.qualname if info is not None else code.co_name


def source_lines(filename, start, end):
    lines = linecache.getlines(filename)[start - 1:end]
    out = "".join(lines)
    if out and not out.endswith("\n"):
        out += "\n"
    return out
