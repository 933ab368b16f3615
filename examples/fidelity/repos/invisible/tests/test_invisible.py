# Nothing of the runner's is visible from a test: no module of ours importable by accident, no
# plugin of ours on the command line, __main__ is pytest's as under `python3 -m pytest`.
import importlib.util
import os
import subprocess
import sys


def test_no_module_of_ours_on_the_path():
    for name in ("worldline_runs", "worldline_pytest", "tool_server", "agent_tools", "trace_script"):
        assert importlib.util.find_spec(name) is None, name


def test_argv_is_pytests():
    assert sys.argv[0].endswith(os.path.join("pytest", "__main__.py"))
    assert not any(a == "-p" or "worldline_" in a for a in sys.argv)


def test_main_is_pytests():
    assert sys.modules["__main__"].__spec__.name == "pytest.__main__"


def test_subprocess_sees_nothing_of_ours():
    code = "import importlib.util as u; print(u.find_spec('worldline_report'), u.find_spec('worldline_tracer'))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["None", "None"]


def test_site_was_imported():
    assert sys.flags.no_site == 0
