"""bench_python.py: what a label costs in Python, beside what Python's own no-op costs.

Run by `make bench` (bench_python.py PYTHON_TESTS_DIR): the module from this
build, and tests/labelled.c built as a C extension for the cost of a C label
in the same process. Each case is a timeit loop of N statements; the cases
are measured in turn, 9 rounds interleaved, so that a noisy neighbour hits
them all alike, and the table gives each case's median over the rounds, net
of the empty loop's. The targets of #34 are ratios taken in each round and
then their median:
  scope / nullcontext      `with labelprof.scope("x"): pass` against
                           `with contextlib.nullcontext(): pass`: at most 1
  decorator / scope        what @labelprof.scope adds to a call, against the
                           with statement's cost: at most 1
nvtx.annotate is measured when the nvtx package is importable.
"""

import contextlib
import os
import platform
import statistics
import sys
import tempfile
import timeit

import labelprof

ROUNDS = 9
N = int(os.environ.get("LP_BENCH_PY_N", "200000"))


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def main():
    sys.path.insert(0, sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "../python/tests"))
    import labelled_build

    tmp = tempfile.TemporaryDirectory(prefix="lp-bench-python-")
    sys.path.insert(0, labelled_build.build(tmp.name))
    import labelled

    try:
        import nvtx
    except ImportError:
        nvtx = None

    def plain():
        pass

    decorated = labelprof.scope("x")(plain)
    g = {
        "nullcontext": contextlib.nullcontext,
        "scope": labelprof.scope,
        "begin": labelprof.begin,
        "end": labelprof.end,
        "instant": labelprof.instant,
        "counter": labelprof.counter,
        "plain": plain,
        "decorated": decorated,
        "nvtx": nvtx,
    }
    cases = [
        ("empty loop", "pass", None),
        ("with contextlib.nullcontext(): pass", "with nullcontext(): pass", None),
        ('with labelprof.scope("x"): pass', 'with scope("x"): pass', None),
        ('  the same, a timeline recording it', 'with scope("x"): pass', "trace"),
        ("plain function call f()", "plain()", None),
        ('@labelprof.scope("x") call', "decorated()", None),
        ('labelprof.begin("x"); labelprof.end()', 'begin("x"); end()', None),
        ('labelprof.instant("x")', 'instant("x")', None),
        ('labelprof.counter("x", 1)', 'counter("x", 1)', None),
        ("C label pair (LP_SCOPE, in a C loop)", None, "c"),
    ]
    if nvtx is not None:
        cases.append(('with nvtx.annotate("x"): pass', 'with nvtx.annotate("x"): pass', None))

    trace_path = os.path.join(tmp.name, "bench.json")
    times = {name: [] for name, _, _ in cases}
    for _ in range(ROUNDS):
        for name, stmt, how in cases:
            if how == "c":
                t0 = timeit.default_timer()
                labelled.pairs(N * 50)
                times[name].append((timeit.default_timer() - t0) / (N * 50) * 1e9)
                continue
            timer = timeit.Timer(stmt, globals=g)
            if how == "trace":
                with labelprof.trace(trace_path, budget_bytes=256 << 20):
                    t = timer.timeit(N)
            else:
                t = timer.timeit(N)
            times[name].append(t / N * 1e9)
    empty = times["empty loop"]

    def net(name, i):
        if name in ("empty loop", "C label pair (LP_SCOPE, in a C loop)"):
            return times[name][i]
        return times[name][i] - empty[i]

    null, scope_name = "with contextlib.nullcontext(): pass", 'with labelprof.scope("x"): pass'
    print("bench_python: a label in Python against Python's no-op context manager (#34)")
    print("cpu: %s; clock: time.perf_counter (CLOCK_MONOTONIC); Python %s (%s)" % (
        cpu_model(), platform.python_version(), sys.executable))
    print("%d rounds interleaved, %d statements each; ns per statement, median over rounds, net of the "
          "empty loop (the empty loop itself is shown raw)" % (ROUNDS, N))
    print()
    print("%-44s %10s %10s %14s" % ("case", "median ns", "min ns", "x nullcontext"))
    for name, _, _ in cases:
        vals = [net(name, i) for i in range(ROUNDS)]
        ratio = statistics.median(net(name, i) / net(null, i) for i in range(ROUNDS))
        print("%-44s %10.1f %10.1f %14.2f" % (name, statistics.median(vals), min(vals), ratio))
    if nvtx is None:
        print("%-44s %10s" % ('with nvtx.annotate("x"): pass', "n/a: the nvtx package is not installed here"))
    r_scope = statistics.median(net(scope_name, i) / net(null, i) for i in range(ROUNDS))
    r_dec = statistics.median(
        (times['@labelprof.scope("x") call'][i] - times["plain function call f()"][i]) / net(scope_name, i)
        for i in range(ROUNDS)
    )
    print()
    print("target: scope / nullcontext <= 1:          %.2f  %s" % (r_scope, "met" if r_scope <= 1 else "NOT MET"))
    print("target: decorator's added cost / scope <= 1: %.2f  %s" % (r_dec, "met" if r_dec <= 1 else "NOT MET"))
    tmp.cleanup()


if __name__ == "__main__":
    main()
