"""`python3 -m pytest` for Worldline, with the report pipe taken before any repository code runs.

PYTEST_DONT_REWRITE (pytest leaves our modules alone: no assertion rewriting, and no
"Module already imported so cannot be rewritten" warning, which suites that turn warnings into
errors would stop on).

Started as `python3 -S worldline_pytest.py --plugins NAME[,NAME...] -- ARGS...`: with -S no
site-packages `.pth` file has run yet, and a repository's build can drop one there (setup.py, an
editable install) that would run first in every interpreter and could find the runner's report
pipe. So the reporting plugin is imported first, while only the standard library and
/worldline/lib are importable: it takes the pipe's descriptor, makes it non-inheritable and drops
its number from the environment (the report key itself never enters this process: the runner
signs, worldline_runs.py). Then site-packages are set up as a normal start would (`site.main()`,
`.pth` files included) and `run` takes over; the zygote's forked runs (worldline_zygote.py) call
the same `run`.

`run` makes the process what `python3 -m pytest ARGS` would have been, so that no suite can tell:
- our plugins are imported here and handed to `pytest.main(plugins=...)`: ARGS are the suite's
  alone (no `-p` of ours in sys.argv or config.invocation_params, no PYTEST_PLUGINS that a test's
  own pytest subprocess would inherit);
- /worldline/lib leaves sys.path once they are imported: tests cannot import a module of ours by
  accident (a test's `import tool_server` finds its own or none), nor can a subprocess;
- `__main__` looks like `python -m pytest`'s (its spec is pytest.__main__'s), so a test that
  starts a `spawn` or `forkserver` multiprocessing child does not re-run this file there
  (multiprocessing re-imports a main *script* by path in the child, but never a `-m` main);
- sys.argv is pytest's `__main__.py` and ARGS, as under `-m`;
- sys.flags says site was imported (as it now has been): multiprocessing starts its spawn and
  forkserver children with the flags it reads there, and a `-S` child would run no `.pth` file
  (an editable install's import hook among them).
"""
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))


def split_argv(argv):
    """(plugin module names, pytest's arguments) from `--plugins a,b -- ARGS`; a bare ARGS has none."""
    if argv[:1] == ["--plugins"] and argv[2:3] == ["--"]:
        return [name for name in argv[1].split(",") if name], argv[3:]
    return [], argv


def _hide_ourselves():
    """/worldline/lib off the import path: our modules stay loaded, none can be found anew."""
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]
    sys.path_importer_cache.pop(_HERE, None)


def _as_python_m_pytest(args):
    import importlib.util

    spec = importlib.util.find_spec("pytest.__main__")
    main = sys.modules["__main__"]
    main.__spec__, main.__file__, main.__loader__, main.__package__ = spec, spec.origin, spec.loader, "pytest"
    sys.argv = [spec.origin] + list(args)
    if hasattr(sys, "orig_argv"):
        sys.orig_argv = [sys.orig_argv[0], "-m", "pytest"] + list(args)


def _site_flag_cleared():
    """sys.flags as a start without -S has them (a named tuple of the same fields, in order)."""
    import collections
    import re

    fields = re.findall(r"(\w+)=([^,)]*)", repr(sys.flags))
    flags = collections.namedtuple("flags", [name for name, _ in fields])(*(getattr(sys.flags, name) for name, _ in fields))
    return flags._replace(no_site=0)


def run(argv):
    """pytest's exit status for `argv` (see split_argv), as `python3 -m pytest` would run it; the
    working directory goes first on sys.path, as `-m` puts it."""
    import importlib

    names, args = split_argv(argv)
    plugins = [importlib.import_module(name) for name in ["worldline_report"] + names]
    _hide_ourselves()
    sys.path.insert(0, os.getcwd())
    _as_python_m_pytest(args)
    if sys.flags.no_site:
        sys.flags = _site_flag_cleared()
    import pytest

    code = pytest.main(args, plugins=plugins)
    # As pytest's console_main: the output flushed, a reader gone early is no crash.
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    return int(code)


if __name__ == "__main__":
    import worldline_report  # noqa: F401  (takes the report pipe's descriptor on import, before site)
    import site

    site.main()
    sys.exit(run(sys.argv[1:]))
