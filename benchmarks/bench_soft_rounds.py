"""DS-FL's rounds of soft labels on census, beside central XGBoost, the public set's
ceiling and the other algorithms (issue: within 0.01 of central XGBoost).

The census data does not ship with scikit-learn, so pass a local copy (UCI's
``adult.data``, LIBSVM's ``a9a`` or a CSV with the label last). Every seed draws the
FedKT paper's 75/12.5/12.5 train/public/test split and 50 Dirichlet(beta) parties
(``load_federated``) and fits, with XGBoost (``--trees`` trees of depth 6) at every
tier: one model on all training rows (central, not federated); one on as many training
rows as the public set holds, with their true labels (the ceiling of any model distilled
on the public set alone, not federated); DS-FL at its defaults (the parties' vote) and
distilled into one model, and with the paper's averaging (every party weighing the same,
each public row weighing one, no matching of class shares); FedCT (the parties' vote;
distilled); FedKT's default; the ensemble of every party's model. Prints test accuracy
(mean ± std over seeds), its gap to central (mean), the predicted positive rate beside
the truth, rounds and fit seconds.

    python benchmarks/bench_soft_rounds.py --path adult.data        # 3 seeds, beta 0.5
        [--parties 50] [--beta 0.5] [--trees 100] [--n-jobs 2] [--methods ...]

Produces: doc/performance/dsfl.rst, "Soft-label rounds on census".
"""

import time
import warnings
from collections import defaultdict

import numpy as np
from _common import (accuracy_axis, cell_spread, mean_std, new_figure, parser, print_table,
                     run_parallel)
from joblib import delayed
from sklearn.base import clone
from xgboost import XGBClassifier

from skfedkt import (DSFLClassifier, FedCTClassifier, FedKTClassifier,
                     OneShotEnsembleClassifier)
from skfedkt.datasets import load_federated

CENTRAL = "central XGBoost (not federated)"
CEILING = "public size, true labels (not federated)"
PAPER = "DS-FL, the paper's averaging (the parties' vote)"
METHODS = [CENTRAL, CEILING, "DS-FL (default: the parties' vote)", "DS-FL, distilled", PAPER,
           "FedCT (the parties' vote)", "FedCT, distilled", "FedKT (default)",
           "one-shot ensemble (all parties)"]


def xgboost(n_trees):
    return XGBClassifier(n_estimators=n_trees, max_depth=6, n_jobs=1)


def make(method, n_trees, seed):
    base = xgboost(n_trees)
    return {
        CENTRAL: lambda: clone(base).set_params(random_state=seed),
        CEILING: lambda: clone(base).set_params(random_state=seed),
        METHODS[2]: lambda: DSFLClassifier(base, random_state=seed),
        METHODS[3]: lambda: DSFLClassifier(base, distill=True, random_state=seed),
        PAPER: lambda: DSFLClassifier(base, public_weight=1.0, party_weight="equal",
                                      match_shares=False, random_state=seed),
        METHODS[5]: lambda: FedCTClassifier(base, random_state=seed),
        METHODS[6]: lambda: FedCTClassifier(base, distill=True, random_state=seed),
        METHODS[7]: lambda: FedKTClassifier(base, random_state=seed),
        METHODS[8]: lambda: OneShotEnsembleClassifier(base, selection="all",
                                                      random_state=seed),
    }[method]()


def run_seed(path, n_parties, beta, seed, method, n_trees):
    data = load_federated("adult", path=path, n_parties=n_parties, beta=beta,
                          min_party_size=5, random_state=seed)
    model = make(method, n_trees, seed)
    start = time.perf_counter()
    classes, codes = np.unique(data.y_train, return_inverse=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if method in (CENTRAL, CEILING):  # XGBoost alone learns class codes
            rows = (slice(None) if method == CENTRAL else np.random.RandomState(
                seed).choice(len(codes), len(data.X_public), replace=False))
            model.fit(data.X_train[rows], codes[rows])
        else:
            model.fit(data.X_train, data.y_train, groups=data.groups,
                      X_unlabeled=data.X_public)
    seconds = time.perf_counter() - start
    predicted = model.predict(data.X_test)
    if method in (CENTRAL, CEILING):
        predicted = classes[predicted]
    positive = np.unique(data.y_train)[1]
    # rounds of communication: none for a model of pooled rows, one for one-shot methods
    rounds = 0 if method in (CENTRAL, CEILING) else getattr(model, "n_rounds_", 1)
    return (np.mean(predicted == data.y_test), np.mean(predicted == positive),
            np.mean(data.y_test == positive), rounds, seconds)


def main(argv=None):
    command = parser(__doc__, seeds=3, n_jobs=2, trees=100)
    command.add_argument("--path", required=True, help="local copy of the census data "
                         "(UCI adult.data, LIBSVM a9a, or CSV)")
    command.add_argument("--parties", type=int, default=50)
    command.add_argument("--beta", type=float, default=0.5)
    command.add_argument("--methods", nargs="+", choices=METHODS, default=METHODS)
    args = command.parse_args(argv)

    keys = [(seed, method) for seed in range(args.seeds) for method in args.methods]
    runs = run_parallel((delayed(run_seed)(args.path, args.parties, args.beta, seed,
                                           method, args.trees) for seed, method in keys),
                        args.n_jobs, "census fits (seed, method)")
    results = defaultdict(list)
    for (_, method), run in zip(keys, runs):
        results[method].append(run)
    central = np.mean([run[0] for run in results.get(CENTRAL, [(np.nan,)])])
    print(f"Census, {args.parties} Dirichlet({args.beta:g}) parties, XGBoost ({args.trees} "
          f"trees, depth 6) at every tier; test accuracy, mean ± std over {args.seeds} "
          "seeds; its mean gap to central; predicted positive rate (mean) and the truth; "
          "rounds and fit seconds (mean)\n")
    print_table(["method", "accuracy", "gap to central", "positive rate", "truth",
                 "rounds", "fit s"], [
        [method, mean_std([r[0] for r in runs]), f"{np.mean([r[0] for r in runs]) - central:+.3f}",
         f"{np.mean([r[1] for r in runs]):.3f}", f"{np.mean([r[2] for r in runs]):.3f}",
         f"{np.mean([r[3] for r in runs]):.1f}", f"{np.mean([r[4] for r in runs]):.0f}"]
        for method, runs in results.items()
    ])


def figure(results):
    """Each method's accuracy on census, from the stored table of `main`: a point with
    its standard deviation, central XGBoost and the public set's ceiling as lines, on
    an accuracy axis that says where it starts."""
    rows = results["tables"][0]["rows"]
    fig, axes = new_figure(1, 1, height=0.4 * len(rows) + 1.2)
    ax = axes[0][0]
    cells = [cell_spread(row[1]) for row in rows]
    ax.errorbar([mean for mean, _ in cells], range(len(rows)),
                xerr=[std for _, std in cells], fmt="o", capsize=2)
    for name, style in ((CENTRAL, "-"), (CEILING, "--")):
        reference = next((cell_spread(row[1])[0] for row in rows if row[0] == name), None)
        if reference is not None:
            ax.axvline(reference, color="gray", linestyle=style, label=name)
    ax.set_yticks(range(len(rows)), [row[0] for row in rows])
    ax.invert_yaxis()
    accuracy_axis(ax, axis="x", step=0.02)
    ax.legend(loc="lower left", fontsize="small")
    return fig


if __name__ == "__main__":
    main()
