"""How every algorithm's cost grows with parties and with rows, against the base
estimators' own work.

Each configuration runs in a fresh process: the algorithm's ``fit`` at ``--n-jobs``
(CPU time of the main process and of its workers, wall time, peak memory of both), then
the same base-estimator calls made directly in one process (see
``bench_overhead.py``), so the overhead ratio (package CPU / direct CPU) is measured side
by side. Main-process memory is its peak resident size above what the interpreter, the
imports and the data took, as a multiple of the training matrix X (0 means no copy of X
beyond the caller's). The workers' start (interpreter and imports, about 2 s of CPU) is
measured apart and left out. Decision trees of depth 6 keep the runs short; growth exponents
are least-squares slopes of log CPU time (and log peak memory) against log parties or
log rows.

    python benchmarks/bench_scaling.py [--algorithms oneshot fedkt fedkt-hard fedct]
        [--parties 100 1000 10000] [--rows 100000 1000000 10000000] [--n-jobs 2]
        [--direct-max-rows 1000000]

Produces: doc/performance/scaling.rst, "Scaling with rows and parties".
"""

import argparse
import importlib
import json
import resource
import subprocess
import sys
import time

import numpy as np
from _common import (cell_number, log_axis, new_figure, parser, print_table, progress, reset_peak,
                     status_mib, without_warnings)

ALGORITHMS = ("oneshot", "fedkt", "fedkt-hard", "fedct")
ROWS_PER_PARTY = 114  # the parties of the cross-device papers: tens to hundreds of rows
PARTIES_FOR_ROWS = 50


def _peak_mib(who=resource.RUSAGE_SELF):
    return resource.getrusage(who).ru_maxrss / 1024


def _cpu(who=resource.RUSAGE_SELF):
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


def _imported():
    for module in ("sklearn.tree", "skfedkt._engine._fitting"):
        importlib.import_module(module)


def _worker_startup_cpu(n_jobs):
    """CPU seconds the workers take to start (interpreter, imports) before any fit,
    measured on a batch that only imports: subtracted from the fit's worker CPU, since
    a long-lived process pays it once."""
    from joblib import Parallel, delayed
    from joblib.externals.loky import get_reusable_executor

    if n_jobs == 1:
        return 0.0
    Parallel(n_jobs=n_jobs)(delayed(_imported)() for _ in range(n_jobs))
    get_reusable_executor().shutdown(wait=True)
    return _cpu(resource.RUSAGE_CHILDREN)


@without_warnings
def one(algorithm, n_parties, n_rows, n_jobs, direct=True):
    """One configuration, in this (fresh) process; prints one JSON line."""
    from bench_overhead import direct_fedct, direct_fedkt, direct_oneshot, make_data
    from joblib.externals.loky import get_reusable_executor
    from sklearn.tree import DecisionTreeClassifier

    from skfedkt import FedCTClassifier, FedKTClassifier, OneShotEnsembleClassifier

    startup_cpu = _worker_startup_cpu(n_jobs)
    X, y, party, X_public = make_data(n_parties, n_rows // n_parties)
    reset_peak()  # the data's temporaries are not the fit's
    baseline = status_mib("VmRSS")  # interpreter, imports and data
    tree = DecisionTreeClassifier(max_depth=6)
    estimator = {
        "oneshot": OneShotEnsembleClassifier(tree, n_jobs=n_jobs, random_state=0),
        "fedkt": FedKTClassifier(tree, n_jobs=n_jobs, random_state=0),
        "fedkt-hard": FedKTClassifier(tree, voting="hard", n_jobs=n_jobs, random_state=0),
        "fedct": FedCTClassifier(tree, n_rounds=3, n_jobs=n_jobs, random_state=0),
    }[algorithm]
    public = {} if algorithm == "oneshot" else dict(X_unlabeled=X_public)
    cpu, start = _cpu(), time.perf_counter()
    estimator.fit(X, y, groups=party, **public)
    wall, main_cpu = time.perf_counter() - start, _cpu() - cpu
    main_peak = status_mib("VmHWM") - baseline
    get_reusable_executor().shutdown(wait=True)  # reaped workers count as children
    worker_cpu = _cpu(resource.RUSAGE_CHILDREN) - 2 * startup_cpu
    worker_peak = _peak_mib(resource.RUSAGE_CHILDREN)
    direct_calls = {
        "oneshot": lambda: direct_oneshot(tree, X, y, party, X_public),
        "fedkt": lambda: direct_fedkt(tree, X, y, party, X_public, soft=True),
        "fedkt-hard": lambda: direct_fedkt(tree, X, y, party, X_public, soft=False),
        "fedct": lambda: direct_fedct(tree, X, y, party, X_public,
                                      getattr(estimator, "n_rounds_", 0)),
    }[algorithm]
    cpu = _cpu()
    if direct:
        direct_calls()
    direct_cpu = _cpu() - cpu if direct else float("nan")
    print(json.dumps(dict(
        algorithm=algorithm, parties=n_parties, rows=len(X), wall=wall, main_cpu=main_cpu,
        worker_cpu=worker_cpu, direct_cpu=direct_cpu, main_peak_mib=main_peak,
        worker_peak_mib=worker_peak, x_mib=X.nbytes / 2**20,
    )))


def _exponent(sizes, values):
    if len(sizes) < 2:
        return float("nan")
    return float(np.polyfit(np.log(sizes), np.log(np.maximum(values, 1e-9)), 1)[0])


def main(argv=None):
    command = parser(__doc__, n_jobs=2)
    command.add_argument("--algorithms", nargs="+", choices=ALGORITHMS, default=ALGORITHMS)
    command.add_argument("--parties", nargs="*", type=int, default=[100, 1000, 10000])
    command.add_argument("--rows", nargs="*", type=int,
                         default=[100_000, 1_000_000, 10_000_000])
    command.add_argument("--direct-max-rows", type=int, default=None, metavar="N",
                         help="make the direct base-estimator calls (the overhead ratio) "
                              "only where X has at most N rows; default: everywhere")
    command.add_argument("--one", nargs=3, help=argparse.SUPPRESS)
    args = command.parse_args(argv)
    if args.one:
        one(args.one[0], int(args.one[1]), int(args.one[2]), args.n_jobs,
            direct=args.direct_max_rows is None or int(args.one[2]) <= args.direct_max_rows)
        return
    print(f"decision trees (depth 6), n_jobs={args.n_jobs}; parties of {ROWS_PER_PARTY} "
          f"rows, or {PARTIES_FOR_ROWS} parties for the row counts; public set 2000. CPU in "
          "seconds (main process + workers), ratio = package CPU / direct CPU, main "
          "memory above imports and data as a multiple of X", flush=True)
    print_table(["algorithm", "parties", "rows", "wall (s)", "CPU main + workers (s)",
                 "direct (s)", "ratio", "main (MiB)", "main / X", "worker (MiB)"], [])
    results = []
    sweeps = [("parties", p, p * ROWS_PER_PARTY) for p in args.parties]
    sweeps += [("rows", PARTIES_FOR_ROWS, r) for r in args.rows]
    for algorithm, (sweep, parties, rows) in progress(
            [(algorithm, sweep) for algorithm in args.algorithms for sweep in sweeps],
            "configurations (algorithm, parties, rows), each in its own process"):
        run = subprocess.run(
            [sys.executable, __file__, "--one", algorithm, str(parties), str(rows),
             "--n-jobs", str(args.n_jobs),
             *([] if args.direct_max_rows is None
               else ["--direct-max-rows", str(args.direct_max_rows)])],
            capture_output=True, text=True,
        )
        if run.returncode != 0:
            print(f"{algorithm} {parties} parties {rows} rows failed: "
                  f"{(run.stderr.strip().splitlines() or ['killed'])[-1]}", flush=True)
            continue
        r = json.loads(run.stdout.strip().splitlines()[-1])
        r["sweep"] = sweep
        results.append(r)
        cpu = r["main_cpu"] + r["worker_cpu"]
        direct = r["direct_cpu"]
        print_table(None, [[
            algorithm, f"{parties:,}", f"{r['rows']:,}", f"{r['wall']:.1f}", f"{cpu:.1f}",
            "" if np.isnan(direct) else f"{direct:.1f}",
            "" if np.isnan(direct) else f"{cpu / direct:.2f}",
            f"{r['main_peak_mib']:.0f}", f"{r['main_peak_mib'] / r['x_mib']:.2f}",
            f"{r['worker_peak_mib']:.0f}"]])
    print("\ngrowth exponents (1 = linear), over the parties and the rows swept:")
    exponents = []
    for algorithm in args.algorithms:
        row = [algorithm]
        for sweep in ("parties", "rows"):
            runs = [r for r in results if r["algorithm"] == algorithm and r["sweep"] == sweep]
            sizes = [r[sweep] for r in runs]
            row += [f"{_exponent(sizes, [r['main_cpu'] + r['worker_cpu'] for r in runs]):.2f}",
                    f"{_exponent(sizes, [max(r['main_peak_mib'], 1) for r in runs]):.2f}"]
        exponents.append(row)
    print_table(["algorithm", "CPU in parties", "memory in parties", "CPU in rows",
                 "memory in rows"], exponents)


def figure(results):
    """CPU seconds against parties and against rows, every algorithm, from the stored
    table of `main` (log-log: a slope of one is linear)."""
    header, rows = results["tables"][0]["header"], results["tables"][0]["rows"]
    cpu = header.index("CPU main + workers (s)")
    parties = [cell_number(row[1]) for row in rows]
    few = min(parties)  # the rows sweep holds this many parties
    fig, axes = new_figure(1, 2, width=9, height=3.4)
    for algorithm in dict.fromkeys(row[0] for row in rows):
        own = [(cell_number(row[1]), cell_number(row[2]), cell_number(row[cpu]))
               for row in rows if row[0] == algorithm]
        by_parties = sorted((p, c) for p, r, c in own if p != few)
        by_rows = sorted((r, c) for p, r, c in own if p == few)
        for ax, points in zip(axes[0], (by_parties, by_rows)):
            if points:
                ax.plot(*zip(*points), marker="o", label=algorithm.replace("``", ""))
    for ax, what in zip(axes[0], ("parties", f"rows ({few:.0f} parties)")):
        ax.set(xlabel=what, ylabel="CPU seconds")
        drawn = [value for line in ax.lines for value in (*line.get_xdata(),
                                                          *line.get_ydata())]
        if drawn and min(drawn) > 0:  # a tiny run's times may round to zero
            log_axis(ax, "x", what)
            log_axis(ax, "y", "CPU seconds")
    for ax in axes[0]:
        if ax.lines:  # the one that holds the algorithms' lines
            ax.legend(fontsize="small")
            break
    return fig


if __name__ == "__main__":
    main()
