"""Private FedCT against non-private FedCT, at epsilon 1 to 8.

Two protocols, each over ``--seeds`` new splits:

- breast_cancer: the FedCT paper's (5 parties sharing 85 training rows, 370 public rows,
  114 test rows, standardised features), decision trees;
- census (``--census-path``, UCI's adult.data or LIBSVM's a9a, not shipped): 50
  Dirichlet(0.5) parties, a 75/12.5/12.5 train/public/test split, random forests of
  ``--trees`` trees of depth 6.

Rows: non-private FedCT (20 rounds on breast_cancer, as the paper; 5 on census); the
parties' local models alone (``n_rounds=0``, which shares nothing); and at every
epsilon, over 5 rounds, the two private modes with the whole budget spent:
``BitFlips`` at its default worst-case sensitivity, its per-round epsilon set so that
the rounds compose (RDP, delta 1e-5) to the budget, and
``TeacherVotes(epsilon)`` (3 teachers and 20 queries a round on breast_cancer, whose
parties hold 17 rows; the defaults, 10 teachers and 100 queries, on census). Printed
beside: the epsilon the accountant states, the probability that the noise changes a
shared label (bit flips: each bit; teacher votes: a row on which all of a party's
teachers agree) and the public rows labelled in the last round.

    python benchmarks/bench_fedct_privacy.py --census-path adult.data

Produces: doc/privacy.rst, "FedCT: flipping label bits, or noisy teacher votes"
(and its figure on doc/performance/privacy.rst).
"""

import warnings
from collections import defaultdict

import numpy as np
from _common import (accuracy_axis, cell_number, cell_spread, forest, log_axis, mean_std,
                     new_figure, parser, print_table, run_parallel)
from bench_fedct_tables import breast_cancer_protocol
from joblib import delayed
from scipy.optimize import brentq
from sklearn.tree import DecisionTreeClassifier

from skfedkt import FedCTClassifier
from skfedkt.datasets import load_federated
from skfedkt.privacy import BitFlips, TeacherVotes, bit_flip_epsilon

PRIVATE_ROUNDS = 5
EPSILONS = (1.0, 2.0, 4.0, 8.0)
# per protocol: the non-private rounds, and TeacherVotes' teachers and queries a round
SETTINGS = {"breast_cancer": (20, dict(n_teachers=3, n_queries=20)), "census": (5, {})}


def protocol_data(name, seed, census_path):
    if name == "breast_cancer":
        return breast_cancer_protocol(seed)
    data = load_federated("adult", path=census_path, n_parties=50, beta=0.5,
                          min_party_size=5, random_state=seed)
    return (data.X_train, data.y_train, data.groups, data.X_public, data.X_test,
            data.y_test)


def configurations(name):
    rounds, teacher_params = SETTINGS[name]
    yield "non-private FedCT", None, dict(n_rounds=rounds)
    yield "local models only", None, dict(n_rounds=0)
    for epsilon in EPSILONS:
        yield "BitFlips (worst case)", epsilon, dict(n_rounds=PRIVATE_ROUNDS)
        yield "TeacherVotes", epsilon, dict(
            n_rounds=PRIVATE_ROUNDS, privacy=TeacherVotes(epsilon, **teacher_params))


def bit_flips(epsilon, n_public):
    """`BitFlips` whose composed epsilon over the private rounds is `epsilon`: the
    per-bit responses compose far below the pure ``PRIVATE_ROUNDS * epsilon``."""
    def composed(per_round):
        return bit_flip_epsilon(PRIVATE_ROUNDS, epsilon=per_round, sensitivity=2 * n_public,
                                delta=1e-5)

    upper = epsilon
    while composed(upper) < epsilon:
        upper *= 2
    return BitFlips(brentq(lambda per_round: composed(per_round) - epsilon, upper / 2 ** 30,
                           upper))


def run(name, label, epsilon, params, seed, census_path, n_trees):
    X, y, party, X_public, X_test, y_test = protocol_data(name, seed, census_path)
    if label.startswith("BitFlips"):
        params = dict(params, privacy=bit_flips(epsilon, len(X_public)))
    model = DecisionTreeClassifier() if name == "breast_cancer" else forest(n_trees)
    clf = FedCTClassifier(model, random_state=seed, **params)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        clf.fit(X, y, groups=party, X_unlabeled=X_public)
    report = clf.privacy_report_
    return (clf.score(X_test, y_test), clf.epsilon_,
            np.nan if report is None else report.flip_probability,
            int(clf.consensus_mask_.sum()))


def main(argv=None):
    command = parser(__doc__, seeds=5, n_jobs=2, trees=50)
    command.add_argument("--census-path", help="UCI adult.data or LIBSVM a9a (not shipped)")
    command.add_argument("--protocols", nargs="+", choices=list(SETTINGS),
                         default=list(SETTINGS))
    args = command.parse_args(argv)
    names = [name for name in args.protocols if name != "census" or args.census_path]
    jobs = [(name, label, epsilon, params, seed) for name in names
            for label, epsilon, params in configurations(name) for seed in range(args.seeds)]
    runs = run_parallel(
        (delayed(run)(name, label, epsilon, params, seed, args.census_path, args.trees)
         for name, label, epsilon, params, seed in jobs),
        args.n_jobs, "FedCT fits (protocol, mode, epsilon, seed)")
    results = defaultdict(list)
    for (name, label, epsilon, *_), values in zip(jobs, runs):
        results[name, label, epsilon].append(values)
    print(f"Private FedCT: test accuracy, mean ± std over {args.seeds} seeds\n")
    table = []
    for (name, label, epsilon), values in results.items():
        values = np.array(values, dtype=float)
        table.append([
            name, label, "-" if epsilon is None else f"{epsilon:g}", mean_std(values[:, 0]),
            f"{values[:, 1].mean():.3g}",
            "-" if np.isnan(values[0, 2]) else f"{values[:, 2].mean():.3g}",
            f"{values[:, 3].mean():.0f}",
        ])
    print_table(["protocol", "mode", "budget", "accuracy", "epsilon", "flip probability",
                 "labelled public rows"], table)


def figure(results):
    """Accuracy against the privacy budget, one panel per protocol, from the stored
    table of `main`: each private mode's, and non-private FedCT's and the local models'
    as lines."""
    header, rows = results["tables"][0]["header"], results["tables"][0]["rows"]
    protocol, mode, budget, accuracy = (header.index(name) for name in
                                        ("protocol", "mode", "budget", "accuracy"))
    protocols = list(dict.fromkeys(row[protocol] for row in rows))
    fig, axes = new_figure(1, len(protocols), width=4.5 * len(protocols), height=3.4)
    for ax, name in zip(axes[0], protocols):
        own = [row for row in rows if row[protocol] == name]
        for row in own:
            if cell_number(row[budget]) != cell_number(row[budget]):  # no budget: a line
                mean, _ = cell_spread(row[accuracy])
                ax.axhline(mean, linestyle="--", linewidth=1, color="grey"
                           if "local" in row[mode] else "black", label=row[mode])
        for private in dict.fromkeys(row[mode] for row in own
                                     if cell_number(row[budget]) == cell_number(row[budget])):
            points = [(cell_number(row[budget]), *cell_spread(row[accuracy]))
                      for row in own if row[mode] == private]
            budgets, means, stds = zip(*points)
            ax.errorbar(budgets, means, yerr=stds, marker="o", capsize=2, label=private)
        ax.set_title(name)
        log_axis(ax, "x", "epsilon (the whole fit's budget)")
        accuracy_axis(ax)
        ax.set_xticks(budgets, [f"{b:g}" for b in budgets])
        ax.minorticks_off()
    axes[0][0].legend(fontsize="small")
    return fig


if __name__ == "__main__":
    main()
