"""Driver: list functions and their candidate sites; apply one seeded mutation."""

import ast
import random
import sys

from .operators import OPERATOR_NAMES, OPERATORS, SCOPE_MODULE
from .render import RenderError, have_unparse, render
from .source import find_function, iter_functions, node_start_line


class MutationError(Exception):
    exit_code = 2


class NoCandidateSite(MutationError):
    exit_code = 3


class Unsupported(MutationError):
    exit_code = 4


def _seed(seed):
    """Ints (or digit strings) seed as ints; anything else as a string (sha512-seeded, stable)."""
    if isinstance(seed, str):
        try:
            return int(seed)
        except ValueError:
            return seed
    return seed


def list_functions(source, filename="<file>"):
    tree = ast.parse(source, filename)
    out = []
    for qual, node in iter_functions(tree):
        sites = {}
        for name in OPERATOR_NAMES:
            n = len(OPERATORS[name].sites(tree, node))
            if n:
                sites[name] = n
        out.append({
            "qualname": qual,
            "name": node.name,
            "start": node_start_line(node),
            "line": node.lineno,
            "end": node.end_lineno,
            "async": isinstance(node, ast.AsyncFunctionDef),
            "operators": [name for name in OPERATOR_NAMES if name in sites],
            "sites": sites,
        })
    return out


def _lines(text):
    return text.splitlines(keepends=True)


def mutate(source, qualname, operator, seed, filename="<file>", line=None):
    """Apply ``operator`` to function ``qualname`` of ``source``, choosing the site with
    ``random.Random(seed)``.  Returns the result dict (see README); raises
    NoCandidateSite when no site yields a valid, AST-changing mutant."""
    if operator not in OPERATORS:
        raise MutationError("unknown operator %r (known: %s)" % (operator, ", ".join(OPERATOR_NAMES)))
    if not have_unparse():
        raise Unsupported("mutation needs Python 3.9+ (ast.unparse); this is %d.%d" % sys.version_info[:2])
    op = OPERATORS[operator]
    try:
        original = ast.parse(source, filename)
    except SyntaxError as exc:
        raise MutationError("cannot parse %s: %s" % (filename, exc))
    try:
        func = find_function(original, qualname, line)
    except LookupError as exc:
        raise MutationError(str(exc))
    fstart, fend = node_start_line(func), func.end_lineno
    fline = func.lineno
    n_sites = len(op.sites(original, func))
    rng = random.Random(_seed(seed))
    order = list(range(n_sites))
    rng.shuffle(order)
    original_dump = ast.dump(original)
    old_lines = _lines(source)
    for attempt, index in enumerate(order):
        tree = ast.parse(source, filename)
        target = find_function(tree, qualname, fline)
        sites = op.sites(tree, target)
        description, scope = op.apply(tree, target, sites[index], rng)
        if ast.dump(tree) == original_dump:
            continue
        try:
            new_source, edits = render(source, original, tree, filename, focus=func)
        except RenderError:
            continue
        try:
            compile(new_source, filename, "exec", dont_inherit=True)
        except (SyntaxError, ValueError):
            continue
        new_lines = _lines(new_source)
        first = _first_diff(old_lines, new_lines)
        tail = _common_tail(old_lines, new_lines, first)
        start, end = first + 1, len(old_lines) - tail
        if scope != SCOPE_MODULE and not (fstart <= start and end <= fend):
            continue  # a function mutation must stay inside the function
        return {
            "operator": operator,
            "qualname": qualname,
            "file": filename,
            "scope": scope,
            "seed": _seed(seed),
            "site": index,
            "sites": n_sites,
            "attempt": attempt + 1,
            "function_lines": [fstart, fend],
            "changed_lines": [start, end],
            "description": description,
            "original": "".join(old_lines[first:len(old_lines) - tail]),
            "mutated": "".join(new_lines[first:len(new_lines) - tail]),
            "source": new_source,
        }
    raise NoCandidateSite("no candidate site")


def _first_diff(a, b):
    k = 0
    while k < min(len(a), len(b)) and a[k] == b[k]:
        k += 1
    return k


def _common_tail(a, b, first):
    k = 0
    while k < min(len(a), len(b)) - first and a[len(a) - 1 - k] == b[len(b) - 1 - k]:
        k += 1
    return k
