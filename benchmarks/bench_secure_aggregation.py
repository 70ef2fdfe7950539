"""What secure aggregation costs: FedKT's fit with a secure sum against the plain fit.

Synthetic data (``make_classification``, 20 features, parties of equal size). The first
table fits FedKT (random forests of ``--trees`` trees, ``n_jobs``) with the paper's hard
votes and with the default soft votes, plainly and under
``config_context(secure_aggregation=True)``, interleaved (plain, secure, plain, secure
... over ``--repeats``, after one untimed warm-up fit of each) so that a busy machine
slows both alike: the wall seconds of each (mean ± std), secure / plain (mean ± std of
each repeat's ratio), the mean bytes per party (``upload_bytes_``: the skops payload of
the students plainly, the secure sum's messages under it) and whether both fits gave
the public rows the same labels. The bar is secure / plain <= 1.2 on 2 cores; it is
printed, not asserted.

The second table runs the secure sum alone (``run_secure_sum``, one process, the
default threshold, above two thirds of the parties) on vectors of public rows x classes words, one axis varied at a
time around the first table's parties, public rows and classes: seconds (mean ± std
over ``--repeats``) and bytes per party. The third drops parties at that centre: one,
and the most the threshold allows, before the "masked" stage (the survivors unmask
their masks), one before "unmask"; seconds and their ratio to the sum without
dropouts, measured interleaved, and whether the total is the survivors' sum.

    python benchmarks/bench_secure_aggregation.py [--parties 50] [--rows 20000]
        [--public 5000] [--classes 10] [--trees 5] [--n-jobs 2] [--repeats 5]
        [--votings hard soft] [--sweep-parties 5 10 20 50 100]
        [--sweep-public 1000 5000 10000] [--sweep-classes 2 10]

Produces: doc/performance/secure_aggregation.rst, "Secure aggregation".
"""

import secrets
import time
from collections import Counter

import numpy as np
from _common import (
    cell_number,
    cell_spread,
    log_axis,
    mean_std,
    new_figure,
    parser,
    print_table,
    progress,
    without_warnings,
)
from sklearn.datasets import make_classification
from sklearn.ensemble import RandomForestClassifier

import skfedkt
from skfedkt import FedKTClassifier
from skfedkt._deployment._secure import _n_bytes
from skfedkt._secure_sum import Agreement, default_threshold, new_identities, run_secure_sum

BAR = 1.2


def make_data(n_parties, n_rows, n_public, n_classes, seed=0):
    """Training rows, their labels and parties (of equal size), and a public set."""
    X, y = make_classification(n_samples=n_rows + n_public, n_features=20,
                               n_informative=10, n_classes=n_classes, random_state=seed)
    return X[:n_rows], y[:n_rows], np.arange(n_rows) % n_parties, X[n_rows:]


@without_warnings
def timed_fit(voting, trees, n_jobs, secure, data):
    """The wall seconds of one FedKT fit, and the fitted classifier."""
    X, y, groups, X_public = data
    clf = FedKTClassifier(RandomForestClassifier(n_estimators=trees), voting=voting,
                          n_jobs=n_jobs, random_state=0)
    with skfedkt.config_context(secure_aggregation=secure):
        start = time.perf_counter()
        clf.fit(X, y, groups=groups, X_unlabeled=X_public)
        return time.perf_counter() - start, clf


@without_warnings
def mean_upload_bytes(clf):
    return float(np.mean(clf.upload_bytes_))


def fits(args):
    """The first table: plain against secure fits, interleaved."""
    data = make_data(args.parties, args.rows, args.public, args.classes)
    warm = make_data(5, 500, 100, args.classes)  # starts the workers, loads the ciphers
    for secure in (False, True):
        timed_fit("hard", 2, args.n_jobs, secure, warm)
    seconds = {(voting, secure): [] for voting in args.votings for secure in (False, True)}
    sent, same = {}, {voting: True for voting in args.votings}
    runs = progress([(repeat, voting, secure) for repeat in range(args.repeats)
                     for voting in args.votings for secure in (False, True)],
                    "FedKT fits (repeat, voting, plain/secure)")
    labels = {}
    for repeat, voting, secure in runs:
        wall, clf = timed_fit(voting, args.trees, args.n_jobs, secure, data)
        seconds[voting, secure].append(wall)
        if repeat == 0:  # the same bytes every repeat (the same random_state)
            sent[voting, secure] = mean_upload_bytes(clf)
        if secure:
            same[voting] &= bool(np.array_equal(labels[voting], clf.public_labels_))
        else:
            labels[voting] = clf.public_labels_
    rows = []
    for voting in args.votings:
        plain, secure = (np.array(seconds[voting, path]) for path in (False, True))
        rows.append([
            {"hard": "hard (the paper's)", "soft": "soft (the default)"}[voting],
            mean_std(plain, 2), mean_std(secure, 2), mean_std(secure / plain, 2),
            f"{sent[voting, False] / 1000:,.0f}", f"{sent[voting, True] / 1000:,.0f}",
            same[voting]])
    print(f"FedKT fit: {args.parties} parties, {args.rows:,} rows, {args.public:,} public "
          f"rows, {args.classes} classes, random forests of {args.trees} trees, "
          f"n_jobs={args.n_jobs}, {args.repeats} repeats interleaved")
    print_table(["votes", "plain fit (s)", "secure fit (s)", "secure / plain",
                 "plain kB per party", "secure kB per party", "same public labels"], rows)
    for row in rows:
        ratio = cell_number(row[3])
        print(f"bar secure / plain <= {BAR}: {row[0]}: {ratio:.2f}, "
              f"{'met' if ratio <= BAR else 'NOT met'}")


def secure_sum(n_parties, length, drop_before=None):
    """One secure sum of random words: its seconds, the mean bytes a staying party sent,
    and whether the total is the survivors' sum."""
    identity_keys, identities = new_identities(n_parties)
    agreement = Agreement(secrets.token_bytes(32), tuple(range(n_parties)),
                          default_threshold(n_parties), length, identities)
    rng = np.random.default_rng(n_parties)
    inputs = {index: rng.integers(0, 2**16, length, dtype=np.uint64)
              for index in range(n_parties)}
    start = time.perf_counter()
    run = run_secure_sum(agreement, identity_keys, inputs, drop_before)
    seconds = time.perf_counter() - start
    sent = np.zeros(n_parties)
    for messages in run.received.values():
        for message in messages:
            sent[message["party"]] += _n_bytes(message)
    staying = [index for index in range(n_parties) if index not in (drop_before or {})]
    correct = np.array_equal(run.total, sum(inputs[index] for index in run.survivors))
    return seconds, float(sent[staying].mean()), correct


def sums(args):
    """The second and third tables: the secure sum alone, then with dropouts."""
    centre = (args.parties, args.public, args.classes)
    grid = list(dict.fromkeys(
        [(parties, args.public, args.classes) for parties in args.sweep_parties]
        + [(args.parties, public, args.classes) for public in args.sweep_public]
        + [(args.parties, args.public, classes) for classes in args.sweep_classes]
        + [centre]))
    most = args.parties - default_threshold(args.parties)
    drops = list(dict.fromkeys([(0, None), (1, "masked"), (most, "masked"), (1, "unmask")]))
    length = args.public * args.classes
    runs = [("sweep", point) for point in grid] + [("drop", drop) for drop in drops]
    measured = {run: [] for run in runs}
    for repeat, (kind, what) in progress([(repeat, run) for repeat in range(args.repeats)
                                          for run in runs],
                                         "secure sums (repeat, configuration)"):
        if kind == "sweep":
            parties, public, classes = what
            measured[kind, what].append(secure_sum(parties, public * classes))
        else:
            dropped, stage = what
            measured[kind, what].append(secure_sum(
                args.parties, length, {index: stage for index in range(dropped)}))
    print()
    print(f"The secure sum alone: words of public rows x classes, the default threshold, "
          f"{args.repeats} repeats")
    print_table(["parties", "public rows", "classes", "words", "seconds",
                 "kB per party"], [
        [parties, f"{public:,}", classes, f"{public * classes:,}",
         mean_std([m[0] for m in measured["sweep", point]]),
         f"{measured['sweep', point][0][1] / 1000:,.1f}"]
        for point in sorted(grid) for parties, public, classes in [point]])
    print()
    print(f"Dropouts: {args.parties} parties, {length:,} words, threshold "
          f"{default_threshold(args.parties)}, {args.repeats} repeats interleaved")
    none = np.array([m[0] for m in measured["drop", (0, None)]])
    print_table(["dropped", "before stage", "seconds", "ratio to no dropout",
                 "kB per staying party", "total is the survivors' sum"], [
        [dropped, stage or "-", mean_std([m[0] for m in measured["drop", drop]]),
         mean_std(np.array([m[0] for m in measured["drop", drop]]) / none, 2),
         f"{measured['drop', drop][0][1] / 1000:,.1f}",
         all(m[2] for m in measured["drop", drop])]
        for drop in drops for dropped, stage in [drop]])


def data_arguments(command):
    """The options of `make_data`'s parties, rows, public rows and classes."""
    command.add_argument("--parties", type=int, default=50)
    command.add_argument("--rows", type=int, default=20000, help="training rows in all")
    command.add_argument("--public", type=int, default=5000, help="public rows")
    command.add_argument("--classes", type=int, default=10)


def main(argv=None):
    command = parser(__doc__, n_jobs=2, trees=5)
    data_arguments(command)
    command.add_argument("--repeats", type=int, default=5)
    command.add_argument("--votings", nargs="+", choices=["hard", "soft"],
                         default=["hard", "soft"])
    command.add_argument("--sweep-parties", type=int, nargs="*", default=[5, 10, 20, 50, 100])
    command.add_argument("--sweep-public", type=int, nargs="*", default=[1000, 5000, 10000])
    command.add_argument("--sweep-classes", type=int, nargs="*", default=[2, 10])
    args = command.parse_args(argv)
    fits(args)
    sums(args)


def figure(results):
    """The secure sum's seconds against parties (log-log) and against words (log
    words, linear seconds), and the fit's secure / plain ratio, from the stored tables
    of `main`."""
    fit, sweep, _ = (table["rows"] for table in results["tables"])
    # the centre of the sweep: the parties, and the public rows and classes, most rows hold
    parties = Counter(row[0] for row in sweep).most_common(1)[0][0]
    public, classes = Counter((row[1], row[2]) for row in sweep).most_common(1)[0][0]
    fig, axes = new_figure(1, 3, width=11, height=3.6)
    for ax, rows, x, what in (
            (axes[0][0], [row for row in sweep if (row[1], row[2]) == (public, classes)], 0,
             f"parties\n({public} public rows x {classes} classes)"),
            (axes[0][1], [row for row in sweep if row[0] == parties], 3,
             f"words: public rows x classes\n({parties} parties)")):
        points = sorted((cell_number(row[x]), *cell_spread(row[4])) for row in rows)
        xs, seconds, spreads = zip(*points)
        ax.errorbar(xs, seconds, yerr=spreads, marker="o", capsize=2)
        ax.set(ylabel="seconds of the secure sum")
        log_axis(ax, "x", what)
        if x == 0 and min(seconds) > 0:  # a tiny run's times may round to zero
            log_axis(ax, "y", "seconds of the secure sum")
        elif x != 0:  # from zero: the part that does not grow with the words shows
            ax.set_ylim(bottom=0)
    ratios, spreads = zip(*(cell_spread(row[3]) for row in fit))
    ax = axes[0][2]
    ax.bar(range(len(fit)), ratios, yerr=spreads, capsize=3)
    ax.axhline(1, color="black", linewidth=1)
    ax.axhline(BAR, color="black", linewidth=1, linestyle="--", label=f"at most {BAR}, checked")
    ax.set(xticks=range(len(fit)), xticklabels=[row[0].split()[0] for row in fit],
           xlabel="FedKT votes", ylabel="fit seconds, secure / plain")
    ax.legend(fontsize="small", loc="lower right")
    return fig


if __name__ == "__main__":
    main()
