"""3.11's and 3.13's fast locals read directly (_native.c's fast_read) give the records f_locals gave:
the same names, values and order (3.11's dict: a name first bound after a later slot goes to the
end, an unbound one leaves; 3.13's proxy: the bound slots in slot order, then what was set through
f_locals), cells and free variables showing their contents, on the pure Python path's reference."""
import sys

import pytest
from conftest import PROGRAMS, load_program

from worldline_tracer import Tracer, native
from worldline_tracer import tracer as tracer_module

ON_311 = sys.version_info[:2] == (3, 11)
ON_313 = sys.version_info[:2] == (3, 13)


def _run(fn):
    tracer = Tracer(root=PROGRAMS, backend="settrace")
    tracer.start()
    try:
        result = fn()
    finally:
        tracer.stop()
    assert tracer.error is None
    return result, tracer


def test_records_equal_the_dict_path(native_module, monkeypatch):
    p = load_program("fast_locals")
    monkeypatch.setattr(native, "mod", None)
    want, pure = _run(p.main)
    monkeypatch.setattr(native, "mod", native_module)
    got, fast = _run(p.main)
    assert got == want
    assert fast._raw == pure._raw
    assert fast.events == pure.events
    if ON_311 or ON_313:
        assert tracer_module._fast_locals[0] is True
    if sys.version_info >= (3, 13):
        return  # PEP 667: the locals proxy lists the slots in slot order, no dict keeps an order
    # the order cases are there to be compared: late_lower's `early` after `later`, unbind's `a` after `c`
    by_fn = {}
    for e in fast.events:
        if e["kind"] == "line":
            by_fn.setdefault(e["function"], []).append([n for n, _ in e["locals"]])
    assert ["n", "i", "later", "early"] in by_fn["late_lower"]
    assert ["b", "c", "a"] in by_fn["unbind"]
    assert any("msg" in names and "e" not in names for names in by_fn["unbind"])
    assert ["g"] in by_fn["cell_unbound"] and ["g", "v"] in by_fn["cell_unbound"]
    assert ["k", "total"] in by_fn["closures.<locals>.add"]
    assert ["a", "extra"] in by_fn["user_extra"]


@pytest.mark.skipif(not ON_311, reason="3.11's f_locals dict (3.12 keeps the refreshes, 3.13 has PEP 667)")
def test_the_tracer_no_longer_refreshes_the_programs_locals_dict(native_module, monkeypatch):
    """A dict the program took from locals() stays as it would untraced: the direct read writes
    nothing into it (the dict path's refresh at the next event added `x`)."""
    p = load_program("fast_locals")
    assert p.stale() == (False, 1)
    monkeypatch.setattr(native, "mod", native_module)
    assert _run(p.stale)[0] == (False, 1)
    monkeypatch.setattr(native, "mod", None)
    assert _run(p.stale)[0] == (True, 1)


@pytest.mark.skipif(not ON_311, reason="the direct read is built for 3.11 only")
def test_check_refuses_frames_it_cannot_read(native_module, monkeypatch):
    """fast_locals_check answers False for a module-level frame (its locals are its dict) and a
    generator's, and the read stays off until a check agrees again."""
    ns = {"m": native_module, "sys": sys}
    exec("ok = m.fast_locals_check(sys._getframe())", ns)
    assert ns["ok"] is False

    def gen():
        yield native_module.fast_locals_check(sys._getframe())

    assert next(gen()) is False
    monkeypatch.setattr(native, "mod", native_module)
    assert tracer_module._fast_locals_probe(1, 2) is True


@pytest.mark.skipif(not ON_313, reason="3.13's FrameLocalsProxy (PEP 667)")
def test_check_on_313_reads_generators_and_refuses_extra_locals(native_module, monkeypatch):
    """On 3.13 a generator's frame is read in place (the proxy has no dict to keep an order across
    resumptions), a module-level frame is not (its locals are its dict), nor one holding a name set
    through f_locals that is no slot (f_extra_locals: the proxy lists it after the slots)."""
    ns = {"m": native_module, "sys": sys}
    exec("ok = m.fast_locals_check(sys._getframe())", ns)
    assert ns["ok"] is False

    def gen(cell):
        inner = lambda: cell  # noqa: E731 (cell is a cell)
        yield native_module.fast_locals_check(sys._getframe())
        yield inner

    assert next(gen(1)) is True

    def extra():
        here = 1
        sys._getframe().f_locals["not_a_slot"] = here
        return native_module.fast_locals_check(sys._getframe())

    assert extra() is False
    monkeypatch.setattr(native, "mod", native_module)
    assert tracer_module._fast_locals_probe(1, 2) is True
