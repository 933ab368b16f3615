"""Every operator on every function of real-looking modules: the bundled sample
library and a stdlib module of the running interpreter."""

import os as _os
import sys as _sys

_TRACERS = _os.path.dirname(_os.path.dirname(_os.path.abspath(__file__)))
if _TRACERS not in _sys.path:  # no conftest.py here: tracers/tests' conftest is imported by name
    _sys.path.insert(0, _TRACERS)

import ast
import os
import textwrap

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
SAMPLES = os.path.join(HERE, "samples")
from worldline_mutate import OPERATOR_NAMES, NoCandidateSite, list_functions, mutate
from worldline_mutate.source import read_source

MODULES = {
    "ledger": os.path.join(SAMPLES, "ledger.py"),
    "stdlib-textwrap": textwrap.__file__,
}


@pytest.mark.parametrize("name", sorted(MODULES))
def test_every_operator_on_every_function(name):
    path = MODULES[name]
    source, _ = read_source(path)
    original_dump = ast.dump(ast.parse(source))
    lines = source.splitlines(keepends=True)
    produced = {op: 0 for op in OPERATOR_NAMES}
    functions = list_functions(source, path)
    assert functions
    for f in functions:
        for op in OPERATOR_NAMES:
            try:
                r = mutate(source, f["qualname"], op, 0, filename=path, line=f["line"])
            except NoCandidateSite:
                assert op not in f["operators"] or f["sites"][op] > 0
                continue
            assert op in f["operators"]
            new = r["source"]
            compile(new, path, "exec")
            assert ast.dump(ast.parse(new)) != original_dump, (f["qualname"], op)
            start, end = r["changed_lines"]
            new_lines = new.splitlines(keepends=True)
            assert new_lines[:start - 1] == lines[:start - 1]
            assert new_lines[len(new_lines) - (len(lines) - end):] == lines[end:]
            assert "".join(lines[start - 1:end]) == r["original"]
            if r["scope"] == "function":
                assert f["start"] <= start and end <= f["end"], (f["qualname"], op, r["changed_lines"])
            produced[op] += 1
    if name == "ledger":
        assert all(produced.values()), produced  # the sample exercises every operator
    else:
        assert sum(1 for n in produced.values() if n) >= 12, produced
