"""What validated sums cost: FedKT's fit with every party's votes proved valid, against
the plain fit and the masked sum, and the validated sum alone up to 1,000 parties.

The first table fits FedKT with the paper's hard votes on the data of
``bench_secure_aggregation.py`` (synthetic, parties of equal size, random forests of
``--trees`` trees, ``n_jobs``): plainly, under the masked sum and under validated sums
(``config_context(secure_aggregation=...)``), interleaved over ``--repeats`` after one
untimed warm-up fit of each, so that a busy machine slows all alike: wall seconds (mean ±
std), validated / plain (mean ± std of each repeat's ratio), the mean bytes per party
(``upload_bytes_``) and whether the validated fit gave the public rows the plain fit's
labels. The bar is validated / plain <= 2 on 2 cores; it is printed, not asserted.

The second table runs the validated sum alone (``run_validated_sum``, one process, both
aggregators and every party; ``n_jobs`` parallel batches) on FedKT's hard votes: each
party's counts of public rows x classes, each in [0, students] and each row adding up
to the students (the default's), one axis varied at a time: the parties (at
``--sweep-parties-public`` rows), then public rows and classes around the first table's
centre. Seconds (mean ± std over ``--repeats``), seconds per party, kB a party sends the
two aggregators, whether the total is the parties' sum, and, up to
``--masked-max-parties``, the masked sum's seconds on as many words.

    python benchmarks/bench_validated_sum.py [--parties 50] [--rows 20000]
        [--public 5000] [--classes 10] [--trees 5] [--n-jobs 2] [--repeats 3]
        [--sweep-parties 5 10 20 50 100 200 500 1000] [--sweep-parties-public 500]
        [--sweep-public 1000 5000 10000] [--sweep-classes 2 10]
        [--masked-max-parties 100]

Produces: doc/performance/validated_sums.rst, "Validated sums".
"""

import secrets
import time

import numpy as np
from _common import cell_number, cell_spread, log_axis, mean_std, new_figure, parser, \
    print_table, progress
from bench_secure_aggregation import (
    data_arguments,
    make_data,
    mean_upload_bytes,
    secure_sum,
    timed_fit,
)

from skfedkt import FedKTClassifier
from skfedkt._validated_sum._simulation import run_validated_sum
from skfedkt._validated_sum._sums import SumSpec, ValidatedSum

BAR = 2.0
MODES = {False: "plain", True: "masked", "validated": "validated"}


def fits(args):
    """The first table: plain, masked and validated fits, interleaved."""
    data = make_data(args.parties, args.rows, args.public, args.classes)
    warm = make_data(5, 500, 100, args.classes)  # starts the workers, loads the ciphers
    for mode in MODES:
        timed_fit("hard", 2, args.n_jobs, mode, warm)
    seconds = {mode: [] for mode in MODES}
    sent, labels, same = {}, None, True
    for repeat, mode in progress([(repeat, mode) for repeat in range(args.repeats)
                                  for mode in MODES], "FedKT fits (repeat, mode)"):
        wall, clf = timed_fit("hard", args.trees, args.n_jobs, mode, data)
        seconds[mode].append(wall)
        if repeat == 0:
            sent[mode] = mean_upload_bytes(clf)
        if mode is False:
            labels = clf.public_labels_
        elif mode == "validated":
            same &= bool(np.array_equal(labels, clf.public_labels_))
    plain = np.array(seconds[False])
    print(f"FedKT fit, the paper's hard votes: {args.parties} parties, {args.rows:,} rows, "
          f"{args.public:,} public rows, {args.classes} classes, random forests of "
          f"{args.trees} trees, n_jobs={args.n_jobs}, {args.repeats} repeats interleaved")
    print_table(["sum", "fit (s)", "/ plain", "kB per party", "the plain fit's labels"], [
        [MODES[mode], mean_std(seconds[mode], 2),
         mean_std(np.array(seconds[mode]) / plain, 2), f"{sent[mode] / 1000:,.0f}",
         True if mode is False else (same if mode == "validated" else "-")]
        for mode in MODES])
    ratio = float(np.mean(np.array(seconds["validated"]) / plain))
    print(f"bar validated / plain <= {BAR}: {ratio:.2f}, "
          f"{'met' if ratio <= BAR else 'NOT met'}")


def validated_sum(n_parties, n_public, n_classes, n_jobs):
    """One validated sum of FedKT's hard votes: its seconds, the mean bytes a party
    sent, and whether the total is the parties' sum."""
    students = FedKTClassifier().n_students
    spec = SumSpec("votes", (n_public, n_classes), 1, 0, students,
                   row_totals=(students,) * n_parties)
    agreement = ValidatedSum(secrets.token_bytes(32), tuple(range(n_parties)), (spec,))
    rng = np.random.default_rng(n_parties)
    inputs = [{"votes": rng.multinomial(students, np.full(n_classes, 1 / n_classes),
                                        size=n_public)} for _ in range(n_parties)]
    start = time.perf_counter()
    run = run_validated_sum(agreement, inputs, n_jobs=n_jobs)
    seconds = time.perf_counter() - start
    correct = (run.accepted == tuple(range(n_parties))
               and np.array_equal(run.totals["votes"], sum(i["votes"] for i in inputs)))
    return seconds, float(run.sent.mean()), correct


def sums(args):
    """The second table: the validated sum alone, and the masked sum beside it."""
    grid = list(dict.fromkeys(
        [(parties, args.sweep_parties_public, args.classes) for parties in args.sweep_parties]
        + [(args.parties, public, args.classes) for public in args.sweep_public]
        + [(args.parties, args.public, classes) for classes in args.sweep_classes]))
    validated, masked = {point: [] for point in grid}, {point: [] for point in grid}
    for _, point in progress([(repeat, point) for repeat in range(args.repeats)
                              for point in grid], "sums (repeat, configuration)"):
        parties, public, classes = point
        validated[point].append(validated_sum(parties, public, classes, args.n_jobs))
        if parties <= args.masked_max_parties:
            masked[point].append(secure_sum(parties, public * classes)[0])
    print()
    print(f"The validated sum alone: FedKT's hard votes of public rows x classes, "
          f"n_jobs={args.n_jobs}, {args.repeats} repeats")
    print_table(["parties", "public rows", "classes", "validated (s)", "per party (s)",
                 "kB per party", "total right", "masked (s)"], [
        [parties, f"{public:,}", classes, mean_std([m[0] for m in validated[point]]),
         f"{np.mean([m[0] for m in validated[point]]) / parties:.4f}",
         f"{validated[point][0][1] / 1000:,.1f}", all(m[2] for m in validated[point]),
         mean_std(masked[point]) if masked[point] else "-"]
        for point in sorted(grid) for parties, public, classes in [point]])


def main(argv=None):
    command = parser(__doc__, n_jobs=2, trees=5)
    data_arguments(command)
    command.add_argument("--repeats", type=int, default=3)
    command.add_argument("--sweep-parties", type=int, nargs="*",
                         default=[5, 10, 20, 50, 100, 200, 500, 1000])
    command.add_argument("--sweep-parties-public", type=int, default=500,
                         help="public rows of the sweep over parties")
    command.add_argument("--sweep-public", type=int, nargs="*", default=[1000, 5000, 10000])
    command.add_argument("--sweep-classes", type=int, nargs="*", default=[2, 10])
    command.add_argument("--masked-max-parties", type=int, default=100,
                         help="the most parties of a masked sum beside the validated one")
    args = command.parse_args(argv)
    fits(args)
    sums(args)


def figure(results):
    """FedKT's fit seconds by sum, and the validated sum's seconds per party against
    the parties (log x) beside the masked sum's, from the stored tables of `main`."""
    fit, sweep = (table["rows"] for table in results["tables"])
    fig, axes = new_figure(1, 2, width=9, height=3.6)
    seconds, spreads = zip(*(cell_spread(row[1]) for row in fit))
    ax = axes[0][0]
    ax.bar(range(len(fit)), seconds, yerr=spreads, capsize=3)
    ax.set(xticks=range(len(fit)), xticklabels=[row[0] for row in fit],
           xlabel="FedKT's fit, the paper's hard votes", ylabel="wall seconds")
    ax = axes[0][1]
    # the sweep over parties: the public rows and classes most rows hold
    size = max({(row[1], row[2]) for row in sweep},
               key=lambda shape: sum((row[1], row[2]) == shape for row in sweep))
    rows = sorted((row for row in sweep if (row[1], row[2]) == size),
                  key=lambda row: cell_number(row[0]))
    parties = [cell_number(row[0]) for row in rows]
    ax.plot(parties, [cell_number(row[4]) for row in rows], marker="o", label="validated")
    masked = [(count, cell_number(row[7]) / count)
              for count, row in zip(parties, rows) if row[7] != "-"]
    if masked:
        ax.plot(*zip(*masked), marker="s", label="masked")
    log_axis(ax, "x", f"parties ({size[0]} public rows x {size[1]} classes)")
    ax.set(ylabel="seconds per party of the sum alone", ylim=(0, None))
    ax.legend(fontsize="small")
    return fig


if __name__ == "__main__":
    main()
