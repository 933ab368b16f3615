"""Benchmark: worldline's tracer vs untraced vs a naive tracer, in one run (stdlib only).

  python tracers/bench_tracer.py [--rounds N] [--quick]

Runs on the interpreter that runs it. Workloads (all defined in this file; the tracers' scope is
this file only, so everything the workloads call in the standard library is out of scope):
  a1  CPU-bound pure Python: a tokenizer + shunting-yard evaluator over arithmetic expressions
      (locals: small ints, short strings, a token list, an operator stack, a precedence dict)
  a2  CPU-bound pure Python: a sieve + insertion sort + word histogram on mid-sized lists and
      dicts (a few hundred items: the kind of state real loops carry)
  c   library-heavy: a few in-scope lines per iteration, each handing real work to json, re and
      heapq (1200 library calls; most of the untraced time is out of scope)
  c0  in-scope loop on small library calls: 2500 iterations of ~10 in-scope lines around cheap
      json/re/heapq calls on tiny data (most of the untraced time is in scope)
Variants: untraced; ours (the settrace backend, and sys.monitoring on 3.12+), timed from start()
to the finished ``.events`` list; naive: sys.settrace on every frame of every file, and for every
line event ``{k: repr(v) for k, v in frame.f_locals.items()}`` stored in a list (the way PySnooper
works). Each round runs every variant once per workload, interleaved; the table shows medians.
"""
import argparse
import gc
import heapq
import json
import os
import re
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

from worldline_tracer import HAS_MONITORING, Tracer  # noqa: E402

THIS_FILE = os.path.abspath(__file__)
if THIS_FILE.endswith((".pyc", ".pyo")):
    THIS_FILE = THIS_FILE[:-1]


# ------------------------------------------------------------------------------ workloads
PREC = {"+": 1, "-": 1, "*": 2, "/": 2, "%": 2}


def tokenize(src):
    tokens = []
    i = 0
    n = len(src)
    while i < n:
        ch = src[i]
        if ch.isdigit():
            j = i
            while j < n and src[j].isdigit():
                j += 1
            tokens.append(("num", int(src[i:j])))
            i = j
        elif ch in PREC or ch in "()":
            tokens.append(("op", ch))
            i += 1
        else:
            i += 1
    return tokens


def to_rpn(tokens):
    out = []
    stack = []
    for kind, val in tokens:
        if kind == "num":
            out.append(val)
        elif val == "(":
            stack.append(val)
        elif val == ")":
            while stack and stack[-1] != "(":
                out.append(stack.pop())
            stack.pop()
        else:
            while stack and stack[-1] != "(" and PREC[stack[-1]] >= PREC[val]:
                out.append(stack.pop())
            stack.append(val)
    while stack:
        out.append(stack.pop())
    return out


def eval_rpn(rpn):
    stack = []
    for item in rpn:
        if type(item) is int:
            stack.append(item)
        else:
            b = stack.pop()
            a = stack.pop()
            if item == "+":
                stack.append(a + b)
            elif item == "-":
                stack.append(a - b)
            elif item == "*":
                stack.append(a * b)
            else:
                stack.append(a // b if b else 0)
    return stack[0]


def make_exprs(count):
    exprs = []
    seed = 7
    for k in range(count):
        parts = []
        for j in range(6):
            seed = (seed * 1103515245 + 12345) % 2147483648
            parts.append(str(seed % 97 + 1))
        exprs.append("(%s + %s) * %s - %s %% (%s + %s)" % tuple(parts))
    return exprs


EXPRS = make_exprs(120)


def workload_a1():
    results = {}
    total = 0
    for idx, src in enumerate(EXPRS):
        value = eval_rpn(to_rpn(tokenize(src)))
        results[idx % 16] = value
        total += value
    return total


def sieve(n):
    flags = [True] * (n + 1)
    flags[0] = flags[1] = False
    p = 2
    while p * p <= n:
        if flags[p]:
            for m in range(p * p, n + 1, p):
                flags[m] = False
        p += 1
    return [i for i in range(n + 1) if flags[i]]


def insertion_sort(items):
    out = list(items)
    for i in range(1, len(out)):
        key = out[i]
        j = i - 1
        while j >= 0 and out[j] > key:
            out[j + 1] = out[j]
            j -= 1
        out[j + 1] = key
    return out


WORDS = ("alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho "
         "sigma tau upsilon phi chi psi omega").split()


def histogram(count):
    counts = {}
    seed = 3
    for k in range(count):
        seed = (seed * 69069 + 1) % 4294967296
        word = WORDS[seed % len(WORDS)] + str(seed % 13)
        counts[word] = counts.get(word, 0) + 1
    return counts


def workload_a2():
    primes = sieve(3000)
    data = [(x * 7919) % 1000 for x in range(160)]
    ordered = insertion_sort(data)
    counts = histogram(4000)
    return len(primes) + ordered[-1] + len(counts)


DOC = {"key%d" % i: {"id": i, "name": "item%d" % i, "tags": ["a", "b", str(i % 7)], "score": i * 0.5}
       for i in range(40)}
DATA = [(x * 7919) % 1009 for x in range(200)]
WORD = re.compile(r"[a-z]+\d*")


def workload_c():
    # a thin wrapper's tests: few in-scope lines, each handing real work to the standard library
    total = 0
    for k in range(300):
        text = json.dumps(DOC, sort_keys=True)
        back = json.loads(text)
        words = WORD.findall(text)
        small = heapq.nsmallest(5, DATA)
        total += len(back) + len(words) + small[k % 5]
    return total


def workload_c0():
    out = []
    heap = []
    pattern = re.compile(r"[a-z]+\d*")
    for k in range(2500):
        doc = {"id": k, "name": "item%d" % k, "tags": ["a", "b", str(k % 7)], "score": k * 0.5}
        text = json.dumps(doc, sort_keys=True)
        back = json.loads(text)
        words = re.findall(r"[a-z]+", text)
        hits = pattern.findall(back["name"])
        heapq.heappush(heap, (back["score"], k))
        if len(heap) > 50:
            heapq.heappop(heap)
        out.append(len(words) + len(hits))
    return sum(out) + len(heap)


WORKLOADS = [("a1", "CPU: tokenizer + evaluator", workload_a1),
             ("a2", "CPU: sieve + sort + histogram", workload_a2),
             ("c", "library-heavy: json/re/heapq", workload_c),
             ("c0", "in-scope loop on small library calls", workload_c0)]


# ------------------------------------------------------------------------------ variants
class NaiveTracer(object):
    """settrace on every frame of every file; every local repr'd with builtin repr on every line."""

    def __init__(self):
        self.events = []

    def _trace(self, frame, event, arg):
        if event == "line":
            self.events.append((frame.f_code.co_filename, frame.f_lineno,
                                {k: repr(v) for k, v in frame.f_locals.items()}))
        return self._trace

    def run(self, fn):
        sys.settrace(self._trace)
        try:
            fn()
        finally:
            sys.settrace(None)
        return len(self.events)


def scope_this_file(filename):
    return filename == THIS_FILE


def run_untraced(fn):
    fn()
    return 0


def run_ours(backend):
    def run(fn):
        tracer = Tracer(scope=scope_this_file, backend=backend, max_events=10 ** 7,
                        max_lines_per_call=10 ** 7)
        tracer.start()
        try:
            fn()
        finally:
            tracer.stop()
        events = tracer.events
        if tracer.error:
            raise RuntimeError(tracer.error)
        return sum(1 for e in events if e["kind"] == "line")
    return run


def run_naive(fn):
    return NaiveTracer().run(fn)


def variants():
    out = [("untraced", run_untraced), ("ours/settrace", run_ours("settrace"))]
    if HAS_MONITORING:
        out.append(("ours/monitoring", run_ours("monitoring")))
    out.append(("naive", run_naive))
    return out


def timed(run, fn):
    gc.collect()
    t0 = time.perf_counter()
    n = run(fn)
    return time.perf_counter() - t0, n


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--only", default="", help="comma-separated workload keys (a1,a2,c,c0)")
    args = ap.parse_args(argv)
    only = set(filter(None, args.only.split(",")))
    workloads = [w for w in WORKLOADS if not only or w[0] in only]
    vs = variants()
    times = {(w[0], v[0]): [] for w in workloads for v in vs}
    lines = {}
    for w in workloads:  # warm up (imports, caches) and count line events
        for name, run in vs:
            lines[(w[0], name)] = run(w[2])
    for _ in range(args.rounds):
        for key, _, fn in workloads:
            for name, run in vs:
                times[(key, name)].append(timed(run, fn)[0])
    print("Python %s, %d rounds, median seconds; xN = slowdown vs untraced" % (
        sys.version.split()[0], args.rounds))
    header = "%-4s %-32s %-16s %10s %8s %10s" % ("wl", "workload", "variant", "median s", "x", "lines")
    print(header)
    print("-" * len(header))
    for key, title, _ in workloads:
        base = statistics.median(times[(key, "untraced")])
        med = {}
        for name, _ in vs:
            med[name] = statistics.median(times[(key, name)])
            print("%-4s %-32s %-16s %10.4f %7.1fx %10s" % (
                key, title, name, med[name], med[name] / base,
                lines[(key, name)] if name != "untraced" else "-"))
        for name, _ in vs:
            if name.startswith("ours"):
                print("%-4s %-32s %-16s ours/naive speedup: %.2fx" % (
                    key, "", name, med["naive"] / med[name]))
        print()


if __name__ == "__main__":
    main()
