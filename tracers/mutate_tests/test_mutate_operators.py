"""Per-operator unit tests: exact mutated source (golden), compiles, rest of the file
untouched, deterministic, seeds reach different sites, rejection without a site."""

import os as _os
import sys as _sys

_TRACERS = _os.path.dirname(_os.path.dirname(_os.path.abspath(__file__)))
if _TRACERS not in _sys.path:  # no conftest.py here: tracers/tests' conftest is imported by name
    _sys.path.insert(0, _TRACERS)

import ast

import pytest

from worldline_mutate import OPERATOR_NAMES, NoCandidateSite, mutate

SHIP = r'''"""Shipping-cost helpers."""
import math
from decimal import Decimal

RATES = {"standard": 4.5, "express": 9.0}


def shipping_cost(weight, zone, express=False, *, insured=False):
    """Return the cost of shipping a parcel."""
    # heavier parcels pay per extra kilo
    base = RATES["express" if express else "standard"]
    extra = max(0, math.ceil(weight) - 1)
    cost = base + extra * 1.5
    if zone > 2 and not insured:
        cost *= 1.2
    elif zone < 0:
        raise ValueError("bad zone %d" % zone)
    else:
        cost += 0.5
    for surcharge in (0.25, 0.1):
        cost = cost + surcharge
    return round(Decimal(cost), 2)


def idle():
    pass
'''

# operator -> (changed_lines, original text of those lines, mutated text), seed 0, `shipping_cost`
GOLDEN = {
    'remove_body_part': (
        [17, 17],
        '        raise ValueError("bad zone %d" % zone)\n',
        '        pass\n',
    ),
    'remove_body': (
        [11, 22],
        '    base = RATES["express" if express else "standard"]\n    extra = max(0, math.ceil(weight) - 1)\n    cost = base + extra * 1.5\n    if zone > 2 and not insured:\n        cost *= 1.2\n    elif zone < 0:\n        raise ValueError("bad zone %d" % zone)\n    else:\n        cost += 0.5\n    for surcharge in (0.25, 0.1):\n        cost = cost + surcharge\n    return round(Decimal(cost), 2)\n',
        '    return None\n',
    ),
    'remove_param': (
        [8, 8],
        'def shipping_cost(weight, zone, express=False, *, insured=False):\n',
        'def shipping_cost(weight, zone, *, insured=False):\n',
    ),
    'reorder_call_args': (
        [12, 12],
        '    extra = max(0, math.ceil(weight) - 1)\n',
        '    extra = max(math.ceil(weight) - 1, 0)\n',
    ),
    'swap_variables': (
        [13, 14],
        '    cost = base + extra * 1.5\n    if zone > 2 and not insured:\n',
        '    cost = insured + extra * 1.5\n    if zone > 2 and not base:\n',
    ),
    'remove_import': (
        [2, 2],
        'import math\n',
        '',
    ),
    'remove_return': (
        [22, 22],
        '    return round(Decimal(cost), 2)\n',
        '',
    ),
    'binary_op': (
        [19, 19],
        '        cost += 0.5\n',
        '        cost -= 0.5\n',
    ),
    'unary_op': (
        [14, 14],
        '    if zone > 2 and not insured:\n',
        '    if not zone > 2 and not insured:\n',
    ),
    'bool_op': (
        [14, 14],
        '    if zone > 2 and not insured:\n',
        '    if zone > 2 or not insured:\n',
    ),
    'compare_op': (
        [14, 14],
        '    if zone > 2 and not insured:\n',
        '    if zone >= 2 and not insured:\n',
    ),
    'invert_if': (
        [14, 14],
        '    if zone > 2 and not insured:\n',
        '    if not (zone > 2 and not insured):\n',
    ),
    'remove_loop': (
        [20, 21],
        '    for surcharge in (0.25, 0.1):\n        cost = cost + surcharge\n',
        '',
    ),
    'remove_assign': (
        [19, 19],
        '        cost += 0.5\n',
        '        pass\n',
    ),
    'shuffle_statements': (
        [12, 13],
        '    extra = max(0, math.ceil(weight) - 1)\n    cost = base + extra * 1.5\n',
        '    cost = base + extra * 1.5\n    extra = max(0, math.ceil(weight) - 1)\n',
    ),
    'change_constant': (
        [16, 16],
        '    elif zone < 0:\n',
        '    elif zone < 1:\n',
    ),
}


def splice(source, changed, mutated):
    lines = source.splitlines(keepends=True)
    start, end = changed
    return "".join(lines[: start - 1]) + mutated + "".join(lines[end:])


def test_every_operator_has_a_golden_case():
    assert sorted(GOLDEN) == sorted(OPERATOR_NAMES)
    assert len(OPERATOR_NAMES) == 16


@pytest.mark.parametrize("op", OPERATOR_NAMES)
def test_golden(op):
    changed, original, mutated = GOLDEN[op]
    r = mutate(SHIP, "shipping_cost", op, 0, filename="ship.py")
    assert r["operator"] == op and r["qualname"] == "shipping_cost" and r["file"] == "ship.py"
    assert r["changed_lines"] == changed
    assert r["original"] == original
    assert r["mutated"] == mutated
    lines = SHIP.splitlines(keepends=True)
    assert "".join(lines[changed[0] - 1: changed[1]]) == original
    # the whole file is exactly the original with that range replaced
    assert r["source"] == splice(SHIP, changed, mutated)
    compile(r["source"], "ship.py", "exec")
    assert ast.dump(ast.parse(r["source"])) != ast.dump(ast.parse(SHIP))
    assert r["scope"] == ("module" if op == "remove_import" else "function")
    if op != "remove_import":
        assert 8 <= changed[0] and changed[1] <= 22
    assert r["description"]


@pytest.mark.parametrize("op", OPERATOR_NAMES)
def test_deterministic_and_seeds_reach_different_sites(op):
    a = mutate(SHIP, "shipping_cost", op, 5)
    b = mutate(SHIP, "shipping_cost", op, 5)
    assert a == b
    assert mutate(SHIP, "shipping_cost", op, "5") == a  # digit strings seed like ints
    if a["sites"] > 1:
        seen = {mutate(SHIP, "shipping_cost", op, seed)["source"] for seed in range(12)}
        assert len(seen) >= 2


@pytest.mark.parametrize("op", OPERATOR_NAMES)
def test_no_candidate_site(op):
    with pytest.raises(NoCandidateSite):
        mutate(SHIP, "idle", op, 0)


def test_unknown_function_and_operator():
    from worldline_mutate import MutationError

    with pytest.raises(MutationError):
        mutate(SHIP, "nope", "binary_op", 0)
    with pytest.raises(MutationError):
        mutate(SHIP, "shipping_cost", "nope", 0)
