"""Reading source files, locating functions by qualname, and walking a function's code.

Standard library only.  Parsing works on Python 3.8+; rendering a mutant needs
``ast.unparse`` (3.9+), see ``render.py``.
"""

import ast
import io
import tokenize

FUNC_TYPES = (ast.FunctionDef, ast.AsyncFunctionDef)
SCOPE_TYPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)

# Fields never descended into when collecting mutation sites: annotations and
# decorators are not the function's behaviour (and type_params/type_comment are noise).
SKIP_FIELDS = frozenset(("annotation", "returns", "decorator_list", "type_comment", "type_params"))


def read_source(path):
    """Return (text, encoding) of a Python file, decoding by its coding cookie/BOM.

    Line endings are kept as they are in the file (no newline translation)."""
    with open(path, "rb") as fh:
        data = fh.read()
    encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    return data.decode(encoding), encoding


def write_source(path, text, encoding):
    with open(path, "wb") as fh:
        fh.write(text.encode(encoding))


def is_docstring(stmt):
    return (
        isinstance(stmt, ast.Expr)
        and isinstance(stmt.value, ast.Constant)
        and isinstance(stmt.value.value, str)
    )


def node_start_line(node):
    """First line of a statement, counting its decorators."""
    lines = [node.lineno]
    for dec in getattr(node, "decorator_list", None) or ():
        lines.append(dec.lineno)
    return min(lines)


def iter_functions(tree):
    """Yield (qualname, node) for every function/method in the module, in source order.

    Qualnames follow Python's ``__qualname__``: ``Class.method``,
    ``outer.<locals>.inner``.  Functions defined inside module-level compound
    statements (``if``/``try``/...) keep the enclosing prefix."""
    out = []

    def visit(stmts, prefix):
        for stmt in stmts:
            if isinstance(stmt, FUNC_TYPES):
                qual = prefix + stmt.name
                out.append((qual, stmt))
                visit(stmt.body, qual + ".<locals>.")
            elif isinstance(stmt, ast.ClassDef):
                visit(stmt.body, prefix + stmt.name + ".")
            else:
                for field in ("body", "orelse", "finalbody"):
                    visit(getattr(stmt, field, None) or (), prefix)
                for handler in getattr(stmt, "handlers", None) or ():
                    visit(handler.body, prefix)
                for case in getattr(stmt, "cases", None) or ():
                    visit(case.body, prefix)

    visit(tree.body, "")
    return out


class FunctionNotFound(LookupError):
    pass


def find_function(tree, qualname, line=None):
    """Find a function by qualname (``<locals>`` may be omitted: ``outer.inner``).

    When several definitions share the qualname (e.g. in ``if``/``else``
    branches) ``line`` (the ``def`` line or the first decorator line) picks one;
    without it the last definition wins, as it would at import time."""
    wanted = qualname.replace(".<locals>.", ".")
    found = [
        node
        for qual, node in iter_functions(tree)
        if qual == qualname or qual.replace(".<locals>.", ".") == wanted
    ]
    if line is not None:
        found = [n for n in found if line in (n.lineno, node_start_line(n))]
    if not found:
        raise FunctionNotFound("no function %r%s" % (qualname, "" if line is None else " at line %d" % line))
    return found[-1]


def _children(node):
    """Child nodes in ``_fields`` order, skipping annotations/decorators."""
    children = []
    for field in node._fields:
        if field in SKIP_FIELDS:
            continue
        value = getattr(node, field, None)
        if isinstance(value, ast.AST):
            children.append(value)
        elif isinstance(value, list):
            children.extend(v for v in value if isinstance(v, ast.AST))
    return children


def preorder(node):
    """Depth-first pre-order walk in ``_fields`` order, skipping annotations/decorators."""
    stack = [node]
    while stack:
        cur = stack.pop()
        yield cur
        stack.extend(reversed(_children(cur)))


def function_roots(func):
    """The parts of a def that run as the function's code: defaults and body."""
    roots = list(func.args.defaults)
    roots.extend(d for d in func.args.kw_defaults if d is not None)
    roots.extend(func.body)
    return roots


def walk_function(func):
    """Every node of the function's defaults and body (nested scopes included), in a stable order."""
    for root in function_roots(func):
        for node in preorder(root):
            yield node


def walk_own_scope(func):
    """Nodes of the function body that belong to its own scope (no nested defs/lambdas/classes)."""
    stack = list(reversed(func.body))
    while stack:
        cur = stack.pop()
        yield cur
        if isinstance(cur, SCOPE_TYPES):
            continue
        stack.extend(reversed(_children(cur)))


def parent_map(func):
    """id(child) -> (parent, field, index-or-None) for the function's subtree (the def included)."""
    pm = {}
    stack = [func]
    while stack:
        cur = stack.pop()
        for field in cur._fields:
            value = getattr(cur, field, None)
            if isinstance(value, ast.AST):
                pm[id(value)] = (cur, field, None)
                stack.append(value)
            elif isinstance(value, list):
                for i, v in enumerate(value):
                    if isinstance(v, ast.AST):
                        pm[id(v)] = (cur, field, i)
                        stack.append(v)
    return pm


def is_stmt_list(value):
    return isinstance(value, list) and bool(value) and isinstance(value[0], ast.stmt)


def iter_blocks(func):
    """Yield (owner, field) for every statement list in the function (its body first)."""
    yield func, "body"
    for node in walk_function(func):
        for field in node._fields:
            if field in SKIP_FIELDS:
                continue
            if is_stmt_list(getattr(node, field, None)):
                yield node, field


def replace_node(pm, old, new):
    parent, field, index = pm[id(old)]
    if index is None:
        setattr(parent, field, new)
    else:
        getattr(parent, field)[index] = new


def remove_statements(owner, field, start, stop):
    """Delete owner.field[start:stop], keeping the block syntactically valid.

    An emptied block (or a def/class body left with only its docstring) becomes
    ``pass`` (an emptied ``else:`` too: ``else: pass`` keeps the edit small)."""
    block = getattr(owner, field)
    del block[start:stop]
    if not block:
        block.append(ast.Pass())
    elif (
        len(block) == 1
        and is_docstring(block[0])
        and isinstance(owner, FUNC_TYPES + (ast.ClassDef,))
        and field == "body"
    ):
        block.append(ast.Pass())


def short(node, limit=60):
    """A one-line rendering of a node for descriptions (``ast.unparse`` when available)."""
    try:
        text = ast.unparse(node)
    except AttributeError:  # Python 3.8
        text = type(node).__name__
    text = " ".join(text.split())
    if len(text) > limit:
        text = text[: limit - 3] + "..."
    return text


def line_span(node):
    start = node_start_line(node) if hasattr(node, "lineno") else None
    end = getattr(node, "end_lineno", None) or start
    if start is None:
        return "?"
    return "line %d" % start if start == end else "lines %d-%d" % (start, end)
