"""Command line: ``python3 -m worldline_mutate {list,apply,operators} ...``; JSON on stdout.

Exit status: 0 ok; 2 bad input (unknown operator/function, unparsable file);
3 ``{"error": "no candidate site"}``; 4 unsupported interpreter (mutation needs 3.9+).
"""

import argparse
import json
import sys

from .core import MutationError, list_functions, mutate
from .operators import OPERATOR_CLASSES
from .source import read_source, write_source


def _emit(obj):
    sys.stdout.write(json.dumps(obj, indent=None, sort_keys=False) + "\n")


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python3 -m worldline_mutate", description=__doc__)
    sub = parser.add_subparsers(dest="command")
    p_list = sub.add_parser("list", help="functions in FILE and the operators with candidate sites in each")
    p_list.add_argument("file")
    p_apply = sub.add_parser("apply", help="apply OPERATOR to QUALNAME in FILE, site chosen by SEED")
    p_apply.add_argument("file")
    p_apply.add_argument("qualname")
    p_apply.add_argument("operator")
    p_apply.add_argument("seed")
    p_apply.add_argument("--line", type=int, default=None,
                         help="def (or first decorator) line, when several definitions share QUALNAME")
    p_apply.add_argument("--write", action="store_true", help="rewrite FILE in place with the mutant")
    sub.add_parser("operators", help="the operator names, families and descriptions")
    args = parser.parse_args(argv)

    if args.command == "operators":
        _emit([{"name": c.name, "family": c.family, "description": " ".join((c.__doc__ or "").split())}
               for c in OPERATOR_CLASSES])
        return 0
    if args.command not in ("list", "apply"):
        parser.print_usage(sys.stderr)
        return 2
    try:
        source, encoding = read_source(args.file)
    except (OSError, SyntaxError, LookupError) as exc:
        _emit({"error": "cannot read %s: %s" % (args.file, exc)})
        return 2
    if args.command == "list":
        try:
            functions = list_functions(source, args.file)
        except SyntaxError as exc:
            _emit({"error": "cannot parse %s: %s" % (args.file, exc)})
            return 2
        _emit({"file": args.file, "python": "%d.%d" % sys.version_info[:2], "functions": functions})
        return 0
    try:
        result = mutate(source, args.qualname, args.operator, args.seed, filename=args.file, line=args.line)
    except MutationError as exc:
        _emit({"error": str(exc), "operator": args.operator, "qualname": args.qualname, "file": args.file})
        return exc.exit_code
    new_source = result.pop("source")
    if args.write:
        write_source(args.file, new_source, encoding)
    result["written"] = bool(args.write)
    _emit(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
