"""`python3 -m pytest` for Worldline, with the report pipe taken before any repository code runs.

Started as `python3 -S worldline_pytest.py ARGS...`: with -S no site-packages `.pth` file has run
yet, and a repository's build can drop one there (setup.py, an editable install) that would run
first in every interpreter and could find the runner's report pipe. So the reporting plugin is
imported first, while only the standard library and /worldline/lib are importable: it takes the
pipe's descriptor, makes it non-inheritable and drops its number from the environment (the
report key itself never enters this process: the runner signs, worldline_runs.py). Then
site-packages are set up as a normal start would (`site.main()`, `.pth` files included) and
pytest runs with the plugin already loaded (`-p worldline_report` finds it in sys.modules).
"""
import os
import sys

import worldline_report  # noqa: F401  (takes the report pipe's descriptor on import)
import site

site.main()
# As `python -m pytest` would have it: the working directory first on the import path (before
# our own folder, which site.main() has left once, at sys.path[0]).
sys.path.insert(0, os.getcwd())

import pytest  # noqa: E402

sys.exit(pytest.main(sys.argv[1:]))
