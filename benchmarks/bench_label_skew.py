"""Label-skew benchmark: FedKT (default and paper) against the other methods and baselines.

For every dataset and Dirichlet concentration beta, several seeds each draw a new
75/12.5/12.5 train/public/test split and a new party partition (``load_federated``),
then fit every method on it with random forests (50 trees, depth 6) at every tier.
Prints, per dataset and beta, test accuracy as mean ± std over seeds; for binary tasks
the final model's predicted positive rate next to the true one; for every method the
number of seeds in which ``fit`` warned that labels collapsed (``LabelCollapseWarning``)
or in which the final model predicts a single class. "central, public size" is one
forest trained on as many correctly labelled training rows as the public set holds: about
the best a single model that learns the public rows can do without more data. "FedKT,
undistilled" is what ``FedKTClassifier(distill=False)`` predicts, computed from the same
fit: the server's pooled vote of FedKT's students, which the final model learns on the
public rows, applied to the test rows directly; the gap between it and FedKT is what
distilling into one model through the public set costs. "FedKT, five teachers" is the
default before teachers were sized by rows (``n_teachers=5`` for every party). Last, on
how many rows FedKT's default is at least the paper's FedKT (and on how many it falls
more than the paper's standard deviation below it) and at least the ensemble.

    python benchmarks/bench_label_skew.py                 # every dataset, 5 seeds
    python benchmarks/bench_label_skew.py --datasets digits --seeds 3
    python benchmarks/bench_label_skew.py --ablation      # which default does what

Produces: doc/performance/label_skew.rst, "Label skew" (and with --ablation
doc/performance/defaults.rst).

Seeds run in parallel (``--n-jobs``, each fit single-threaded), so results do not
depend on it. The imbalanced task is ``make_classification`` with 76% negatives (the
census task's share), 20,000 rows and 50 parties; at beta=0.1 a two-class Dirichlet
draw leaves most of 50 parties empty, so it uses 10 there (the table says so).
"""

import time
import warnings
from collections import defaultdict

import numpy as np
from _common import (accuracy_axis, cell_spread, forest, mean_std, new_figure, parser, print_table,
                     run_parallel)
from joblib import delayed
from sklearn.base import clone
from sklearn.datasets import make_classification
from sklearn.model_selection import train_test_split
from sklearn.utils import Bunch

from skfedkt import (
    FedCTClassifier,
    FedKTClassifier,
    HardVotes,
    LabelCollapseWarning,
    OneShotEnsembleClassifier,
    SoftVotes,
)
from skfedkt.baselines import solo_scores
from skfedkt.datasets import dirichlet_partition, load_federated

BETAS = (0.1, 0.5, 1.0)
PARTIES = {"digits": 10, "breast_cancer": 5, "wine": 4, "imbalanced": 50}
# two classes and beta=0.1 leave most of 50 Dirichlet parties without rows
PARTIES_AT = {("imbalanced", 0.1): 10}
METHODS = ["FedKT", "FedKT (paper)", "one-shot all", "FedKT, five teachers", "FedCT", "PATE",
           "SOLO", "centralized", "central, public size", "FedKT, undistilled"]
# FedKT's default with one choice switched at a time; "one teacher, soft student labels"
# is the default before 0.1's, "students learn party rows" the one before that
ABLATIONS = {
    "FedKT, five teachers": dict(n_teachers=5),
    "FedKT, unmatched shares": dict(voting=SoftVotes(match_shares=False)),
    "FedKT, summed votes": dict(voting=SoftVotes(pooling="sum")),
    "FedKT, soft student labels": dict(soft_labels="students"),
    "FedKT, soft labels": dict(soft_labels="all"),
    "FedKT, one teacher per partition": dict(n_teachers=1),
    "FedKT, one teacher, soft student labels": dict(n_teachers=1, soft_labels="students"),
    "FedKT, no public copies": dict(voting=SoftVotes(min_public_rows=0)),
    "FedKT, students learn party rows": dict(student_data="party+public",
                                             voting=SoftVotes(min_public_rows=0),
                                             n_teachers=1, soft_labels="students"),
    "FedKT, hard votes only": dict(voting=HardVotes(min_public_rows=2000)),
}


def load(dataset, n_parties, beta, seed):
    if dataset != "imbalanced":
        return load_federated(dataset, n_parties=n_parties, beta=beta, min_party_size=5,
                              random_state=seed)
    # the paper's protocol, as load_federated applies it to the bundled datasets
    X, y = make_classification(n_samples=20000, n_features=20, n_informative=8,
                               weights=[0.76], flip_y=0.02, random_state=seed)
    X_train, X_rest, y_train, y_rest = train_test_split(
        X, y, test_size=0.25, stratify=y, random_state=seed
    )
    X_public, X_test, _, y_test = train_test_split(
        X_rest, y_rest, test_size=0.5, stratify=y_rest, random_state=seed
    )
    groups = dirichlet_partition(y_train, n_parties, beta=beta, min_party_size=5,
                                 random_state=seed)
    return Bunch(X_train=X_train, y_train=y_train, groups=groups, X_public=X_public,
                 X_test=X_test, y_test=y_test)


def make(method, seed, n_trees):
    options = dict(random_state=seed)
    if method == "FedKT":
        return FedKTClassifier(forest(n_trees), **options)
    if method in ABLATIONS:
        return FedKTClassifier(forest(n_trees), **ABLATIONS[method], **options)
    if method in ("FedKT (paper)", "PATE"):
        return FedKTClassifier(forest(n_trees), voting="hard", **options)
    if method == "one-shot all":
        return OneShotEnsembleClassifier(forest(n_trees), selection="all", **options)
    return FedCTClassifier(forest(n_trees), **options)


def run_seed(dataset, beta, seed, methods, n_trees=50):
    """Every method on one split: {method: (accuracy, positive rate, warned, single, s)}."""
    n_parties = PARTIES_AT.get((dataset, beta), PARTIES[dataset])
    data = load(dataset, n_parties, beta, seed)
    results, fitted = {}, {}
    for method in methods:
        start = time.perf_counter()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            if method == "SOLO":
                accuracy = float(np.mean(solo_scores(
                    forest(n_trees), data.X_train, data.y_train, data.groups, data.X_test,
                    data.y_test, random_state=seed,
                )))
                results[method] = (accuracy, np.nan, False, False, time.perf_counter() - start)
                continue
            if method == "FedKT, undistilled":
                # what FedKTClassifier(distill=False) predicts, from the same fit
                fedkt = fitted["FedKT"]
                predicted = fedkt.classes_[fedkt._student_vote_proba(data.X_test).argmax(axis=1)]
                results[method] = (np.mean(predicted == data.y_test), np.nan, False,
                                   len(np.unique(predicted)) == 1,
                                   time.perf_counter() - start)
                continue
            if method in ("centralized", "central, public size"):
                rows = np.arange(len(data.y_train))
                if method == "central, public size":
                    # the ceiling of a model that learns the public rows, labels all right
                    rows = np.random.RandomState(seed).choice(
                        rows, size=len(data.X_public), replace=False
                    )
                model = clone(forest(n_trees)).set_params(random_state=seed)
                model.fit(data.X_train[rows], data.y_train[rows])
            else:
                model = make(method, seed, n_trees)
                groups = None if method == "PATE" else data.groups
                model.fit(data.X_train, data.y_train, groups=groups,
                          X_unlabeled=data.X_public)
                fitted[method] = model
        predicted = model.predict(data.X_test)
        classes = np.unique(data.y_train)
        positive_rate = np.mean(predicted == classes[1]) if len(classes) == 2 else np.nan
        warned = any(issubclass(w.category, LabelCollapseWarning) for w in caught)
        results[method] = (np.mean(predicted == data.y_test), positive_rate, warned,
                           len(np.unique(predicted)) == 1, time.perf_counter() - start)
    truth = np.mean(data.y_test == np.unique(data.y_train)[1])
    return dataset, beta, n_parties, seed, truth, results


def main(argv=None):
    command = parser(__doc__, seeds=5, n_jobs=2, trees=50)
    command.add_argument("--datasets", nargs="+", choices=list(PARTIES), default=list(PARTIES))
    command.add_argument("--betas", nargs="+", type=float, default=list(BETAS))
    command.add_argument("--ablation", action="store_true",
                        help="FedKT with one default switched back at a time, and soft "
                        "labels, instead of the methods")
    command.add_argument("--methods", nargs="+", choices=[*METHODS, *ABLATIONS],
                         help="only these methods (the first is compared with the rest)")
    args = command.parse_args(argv)
    methods = ["FedKT", *ABLATIONS, "FedKT (paper)"] if args.ablation else METHODS
    methods = args.methods or methods
    compared = methods[:5]

    start = time.perf_counter()
    runs = run_parallel(
        (delayed(run_seed)(dataset, beta, seed, methods, args.trees)
         for dataset in args.datasets for beta in args.betas for seed in range(args.seeds)),
        args.n_jobs, f"splits (dataset, beta, seed), {len(methods)} methods each")
    table = defaultdict(list)
    for dataset, beta, n_parties, seed, truth, results in runs:
        table[dataset, beta, n_parties].append((truth, results))

    print(f"Test accuracy, mean ± std over {args.seeds} seeds; random forests ({args.trees} "
          "trees, depth 6) at every tier\n")
    print_table(["dataset", "beta", "parties", *methods], [
        [dataset, f"{beta:g}", n_parties, *(
            mean_std([r[method][0] for _, r in rows])
            for method in methods
        )]
        for (dataset, beta, n_parties), rows in table.items()
    ])
    print("\nBinary tasks: predicted positive rate of the final model (mean over seeds), "
          "and the truth\n")
    print_table(["dataset", "beta", "truth", *compared], [
        [dataset, f"{beta:g}", f"{np.mean([truth for truth, _ in rows]):.3f}", *(
            f"{np.mean([r[method][1] for _, r in rows]):.3f}" for method in compared
        )]
        for (dataset, beta, _), rows in table.items()
        if not np.isnan(rows[0][1]["FedKT"][1])
    ])
    print("\nSeeds with a LabelCollapseWarning / with a single-class final model, and mean "
          "fit seconds (one core)\n")
    print_table(["dataset", "beta", *compared], [
        [dataset, f"{beta:g}", *(
            f"{sum(r[method][2] for _, r in rows)} / {sum(r[method][3] for _, r in rows)}, "
            f"{np.mean([r[method][4] for _, r in rows]):.1f} s"
            for method in compared
        )]
        for (dataset, beta, _), rows in table.items()
    ])
    if methods == METHODS:
        print_targets(table)
    print(f"\ntotal {time.perf_counter() - start:.0f} s")


def print_targets(table):
    """How FedKT's default compares, row by row, with the paper's FedKT and the ensemble."""
    def stats(rows, method):
        accuracies = [r[method][0] for _, r in rows]
        return np.mean(accuracies), np.std(accuracies)

    counts = defaultdict(int)
    for rows in table.values():
        fedkt, ensemble = stats(rows, "FedKT"), stats(rows, "one-shot all")
        beyond_ceiling = ensemble[0] > stats(rows, "central, public size")[0]
        paper = stats(rows, "FedKT (paper)")
        counts["paper"] += fedkt[0] >= paper[0]
        counts["below paper"] += fedkt[0] < paper[0] - paper[1]
        counts["ensemble"] += fedkt[0] >= ensemble[0]
        counts["spread"] += fedkt[1] <= ensemble[1]
        counts["beyond"] += beyond_ceiling
        counts["ensemble, within"] += fedkt[0] >= ensemble[0] and not beyond_ceiling
        counts["undistilled"] += stats(rows, "FedKT, undistilled")[0] >= ensemble[0]
    n_rows = len(table)
    print(f"""
FedKT's default, of {n_rows} rows: at least the paper's FedKT on {counts["paper"]} (below \
it by more than the paper's standard deviation on {counts["below paper"]}), at least the \
ensemble on {counts["ensemble"]}, with a spread no larger than the ensemble's on \
{counts["spread"]}.
The ensemble beats "central, public size" on {counts["beyond"]} rows (there no model that \
learns the public rows alone is expected to reach it); on the other {n_rows - counts["beyond"]} \
FedKT is at least the ensemble on {counts["ensemble, within"]}.
Before distillation, the server's pooled vote of FedKT's students is at least the ensemble \
on {counts["undistilled"]} of {n_rows} rows.""")


# the methods the figure of the default run draws (its table has every one)
FIGURE_METHODS = ("FedKT", "FedKT (paper)", "one-shot all", "FedCT", "PATE", "SOLO",
                  "centralized")


def figure(results):
    """From a stored table of `main`: with its default methods, accuracy against beta, one
    panel per dataset; with ``--ablation``, one panel per default switched back."""
    table = results["tables"][0]
    header, rows = table["header"], table["rows"]
    if "one-shot all" not in header:
        return _ablation_figure(header, rows)
    methods = [m for m in header[3:] if m in FIGURE_METHODS]
    datasets = list(dict.fromkeys(row[0] for row in rows))
    fig, axes = new_figure(1, len(datasets), width=2.6 * len(datasets), height=3.4)
    for ax, dataset in zip(axes[0], datasets):
        own = [row for row in rows if row[0] == dataset]
        betas = [row[1] for row in own]
        for method in methods:
            column = header.index(method)
            means, stds = zip(*(cell_spread(row[column]) for row in own))
            ax.errorbar(range(len(betas)), means, yerr=stds, marker="o", capsize=2,
                        label=method, linewidth=2.5 if method == "FedKT" else 1)
        ax.set(title=dataset, xticks=range(len(betas)),
               xticklabels=betas, xlabel="Dirichlet beta (smaller: more skew)")
        accuracy_axis(ax)
    fig.legend(*axes[0][0].get_legend_handles_labels(), loc="outside lower center",
               ncol=min(len(methods), 5), fontsize="small")
    return fig


def _ablation_figure(header, rows):
    """Each variant's accuracy minus the default's, in points, on every dataset and beta:
    one panel per default switched back, with the spread of the difference's parts."""
    variants = header[4:]
    n_columns = 3
    n_rows = -(-len(variants) // n_columns)
    fig, axes = new_figure(n_rows, n_columns, width=10, height=2.2 * n_rows + 1)
    labels = [f"{row[0]}, beta {row[1]}" for row in rows]
    default = np.array([cell_spread(row[3]) for row in rows])
    # the empty slots end the row above the last, so that the last row is full and
    # holds the rows' names under every column
    slots = list(axes.flat)
    blank = len(slots) - len(variants)
    cut = len(slots) - n_columns - blank
    used = slots[:cut] + slots[cut + blank:]
    for ax in slots[cut:cut + blank]:
        ax.set_visible(False)
    for ax, variant in zip(used, variants):
        own = np.array([cell_spread(row[header.index(variant)]) for row in rows])
        gain = 100 * (own[:, 0] - default[:, 0])
        ax.bar(range(len(rows)), gain, yerr=100 * np.hypot(own[:, 1], default[:, 1]),
               capsize=1.5, color=np.where(gain >= 0, "tab:blue", "tab:red"))
        ax.axhline(0, color="black", linewidth=0.8)
        ax.set_title(variant.removeprefix("FedKT, "), fontsize="medium")
        ax.set_xticks(range(len(rows)), [])
    for ax in axes[-1]:
        ax.set_xticks(range(len(rows)), labels, rotation=90, fontsize="x-small")
    for ax in axes[:, 0]:
        ax.set_ylabel("points vs. default")
    return fig


if __name__ == "__main__":
    main()
