"""The command line: JSON shapes, exit codes, --write."""

import os as _os
import sys as _sys

_TRACERS = _os.path.dirname(_os.path.dirname(_os.path.abspath(__file__)))
if _TRACERS not in _sys.path:  # no conftest.py here: tracers/tests' conftest is imported by name
    _sys.path.insert(0, _TRACERS)

import json
import os
import shutil
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
TRACERS = os.path.dirname(HERE)
SAMPLES = os.path.join(HERE, "samples")

LEDGER = os.path.join(SAMPLES, "ledger.py")


def run(*args, python=sys.executable):
    env = dict(os.environ, PYTHONPATH=TRACERS, PYTHONDONTWRITEBYTECODE="1")
    p = subprocess.run([python, "-m", "worldline_mutate"] + list(args), capture_output=True, text=True, env=env)
    return p.returncode, (json.loads(p.stdout) if p.stdout.strip() else None), p.stderr


def test_list():
    rc, out, _ = run("list", LEDGER)
    assert rc == 0
    assert out["file"] == LEDGER
    by_name = {f["qualname"]: f for f in out["functions"]}
    assert {"parse_amount", "Ledger.post", "parse_journal", "parse_journal.<locals>.flush", "replay"} <= set(by_name)
    post = by_name["Ledger.post"]
    assert post["line"] == post["start"] and post["end"] > post["start"]
    assert "remove_loop" in post["operators"] and post["sites"]["remove_loop"] == 2
    describe = by_name["Ledger.describe"]
    assert describe["start"] == describe["line"] - 1  # decorated
    assert by_name["replay"]["async"] is True
    for f in out["functions"]:
        assert set(f) == {"qualname", "name", "start", "line", "end", "async", "operators", "sites"}
        assert f["operators"] == [op for op in f["operators"] if f["sites"][op] > 0]


def test_apply_prints_json_and_leaves_file_alone(tmp_path):
    path = tmp_path / "ledger.py"
    shutil.copy(LEDGER, path)
    before = path.read_bytes()
    rc, out, _ = run("apply", str(path), "Ledger.balance", "compare_op", "3")
    assert rc == 0
    assert {"operator", "qualname", "file", "changed_lines", "description", "original", "mutated", "scope",
            "seed", "site", "sites", "written"} <= set(out)
    assert out["operator"] == "compare_op" and out["qualname"] == "Ledger.balance" and out["written"] is False
    assert path.read_bytes() == before
    lines = before.decode("utf-8").splitlines(keepends=True)
    start, end = out["changed_lines"]
    assert "".join(lines[start - 1:end]) == out["original"]


def test_apply_write_rewrites_in_place(tmp_path):
    path = tmp_path / "ledger.py"
    shutil.copy(LEDGER, path)
    before = path.read_text(encoding="utf-8")
    rc, out, _ = run("apply", str(path), "parse_amount", "binary_op", "1", "--write")
    assert rc == 0 and out["written"] is True
    after = path.read_text(encoding="utf-8")
    lines = before.splitlines(keepends=True)
    start, end = out["changed_lines"]
    assert after == "".join(lines[:start - 1]) + out["mutated"] + "".join(lines[end:])
    compile(after, str(path), "exec")
    # same inputs, same answer (on the original content)
    rc2, out2, _ = run("apply", LEDGER, "parse_amount", "binary_op", "1")
    assert {k: v for k, v in out2.items() if k not in ("file", "written")} == \
        {k: v for k, v in out.items() if k not in ("file", "written")}


def test_no_candidate_site_exits_3():
    rc, out, _ = run("apply", LEDGER, "Ledger.__len__", "remove_loop", "0")
    assert rc == 3 and out["error"] == "no candidate site"


def test_bad_input_exits_2():
    rc, out, _ = run("apply", LEDGER, "Nope.nope", "remove_loop", "0")
    assert rc == 2 and "Nope.nope" in out["error"]
    rc, out, _ = run("apply", LEDGER, "parse_amount", "frobnicate", "0")
    assert rc == 2 and "unknown operator" in out["error"]


def test_operators_listing():
    rc, out, _ = run("operators")
    assert rc == 0 and len(out) == 16
    assert {o["family"] for o in out} == {"cwm", "swe-smith"}


PY38 = "/root/.pyenv/versions/3.8.18/bin/python"


@pytest.mark.skipif(not os.path.exists(PY38), reason="no Python 3.8 here")
def test_python38_lists_but_declines_to_mutate():
    rc, out, _ = run("list", LEDGER, python=PY38)
    assert rc == 0 and out["python"] == "3.8" and out["functions"]
    rc, out, _ = run("apply", LEDGER, "parse_amount", "binary_op", "0", python=PY38)
    assert rc == 4 and "3.9" in out["error"]
