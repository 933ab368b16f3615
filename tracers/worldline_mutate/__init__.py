"""worldline_mutate: seeded AST mutation operators for mutation-fix tasks (stdlib only).

Usage from Python::

    from worldline_mutate import mutate, list_functions, OPERATOR_NAMES
    result = mutate(source, "Class.method", "compare_op", 7, filename="pkg/mod.py")

and from the shell (``python3 -m worldline_mutate --help``)::

    python3 -m worldline_mutate list FILE
    python3 -m worldline_mutate apply FILE QUALNAME OPERATOR SEED [--line N] [--write]
"""

from .core import MutationError, NoCandidateSite, Unsupported, list_functions, mutate
from .operators import OPERATOR_NAMES, OPERATORS

__all__ = [
    "MutationError", "NoCandidateSite", "Unsupported", "list_functions", "mutate",
    "OPERATOR_NAMES", "OPERATORS",
]
