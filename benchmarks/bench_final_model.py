"""What FedKT's final model could learn from the students' pooled vote, and what it gains.

The server's final model is FedKT's second distillation: it learns the students' pooled
vote on the public rows (and their jittered copies). Nothing it learns reaches a party's
upload, so any choice here is free of privacy cost; this script measures whether one
carries more of the vote into the final model. For every dataset, beta and seed it fits
FedKT's default once and then trains the final model anew (a forest like the default's)
on the pooled vote of the same students, in several ways:

- *default*: the fitted FedKT's own final model (winning class, public rows and copies up
  to ``SoftVotes(min_public_rows)``);
- *winning class, N rows*: the same, on the public rows and jittered copies up to N rows;
- *confidence weights*: the winning class, each row weighted by its largest vote share;
- *margin weights*: weighted by the gap between its two largest vote shares;
- *soft targets*: every row once per class, weighted by the class's vote share (as
  ``soft_labels="all"`` teaches it).

Also the pooled vote itself on the test rows (*undistilled*, ``distill=False``), the
average of the parties' own forests (*ensemble*), and that average taught to a forest
like the final model through the same rows (*ensemble, distilled, N rows*: the winning
class of the parties' averaged forests on the public rows and their copies). The last is
what one model learned through the public set gets from the parties' own models: what
the public set itself costs, a reference rather than a method. Test accuracy, mean ± std
over seeds.

    python benchmarks/bench_final_model.py                       # 3 seeds, beta 0.5
    python benchmarks/bench_final_model.py --betas 0.1 0.5 1 --census-path adult.data

Produces: doc/performance/final_model.rst, "What the final model learns".
"""

import time
import warnings
from collections import defaultdict

import numpy as np
from _common import cell_number, forest, mean_std, new_figure, parser, print_table, run_parallel
from joblib import delayed
from sklearn.base import clone

from skfedkt import FedKTClassifier, OneShotEnsembleClassifier
from skfedkt._engine._augment import jittered_rows
from skfedkt.datasets import load_federated

PARTIES = {"digits": 10, "wine": 4, "breast_cancer": 5, "adult": 50}
ROWS = (2000, 10000)


def _weights(shares, kind):
    if kind == "confidence":
        return shares.max(axis=1)
    ranked = np.sort(shares, axis=1)
    return ranked[:, -1] - ranked[:, -2] + 1e-3  # a tie still counts a little


def _transfer_rows(X_public, n_rows, seed):
    copies = jittered_rows(X_public, n_rows, seed)
    return X_public if copies is None else np.vstack([X_public, copies])


def _learner(seed, n_trees):
    return clone(forest(n_trees)).set_params(random_state=seed)


def final_models(fitted, X_public, seed, n_trees):
    """{name: fitted final forest} learned from `fitted`'s pooled student vote."""
    models = {}
    for n_rows in ROWS:
        X = _transfer_rows(X_public, n_rows, seed)
        shares = fitted._student_vote_proba(X)
        winners = shares.argmax(axis=1)
        models[f"winning class, {n_rows} rows"] = _learner(seed, n_trees).fit(X, winners)
        for kind in ("confidence", "margin"):
            models[f"{kind} weights, {n_rows} rows"] = _learner(seed, n_trees).fit(
                X, winners, sample_weight=_weights(shares, kind))
        rows, classes = np.nonzero(shares > 0)
        models[f"soft targets, {n_rows} rows"] = _learner(seed, n_trees).fit(
            X[rows], classes, sample_weight=shares[rows, classes])
    return models


def distilled_ensembles(ensemble, X_public, seed, n_trees):
    """{name: forest} learned from the winning class of `ensemble` (the parties' own
    forests averaged) on the public rows and their copies, as the final model learns."""
    models = {}
    for n_rows in ROWS:
        X = _transfer_rows(X_public, n_rows, seed)
        models[f"ensemble, distilled, {n_rows} rows"] = _learner(seed, n_trees).fit(
            X, ensemble.predict_proba(X).argmax(axis=1))
    return models


def run_seed(dataset, beta, seed, n_trees, census_path):
    options = {"path": census_path} if dataset == "adult" else {}
    data = load_federated(dataset, n_parties=PARTIES[dataset], beta=beta, min_party_size=5,
                          random_state=seed, **options)
    fit = {"groups": data.groups, "X_unlabeled": data.X_public}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fitted = FedKTClassifier(forest(n_trees), random_state=seed).fit(
            data.X_train, data.y_train, **fit)
        ensemble = OneShotEnsembleClassifier(forest(n_trees), selection="all",
                                             random_state=seed).fit(
            data.X_train, data.y_train, **fit)
    X_public = np.asarray(data.X_public, dtype=float)
    codes = np.searchsorted(fitted.classes_, data.y_test)
    results = {
        "default": fitted.score(data.X_test, data.y_test),
        "undistilled": np.mean(
            fitted._student_vote_proba(data.X_test).argmax(axis=1) == codes),
        "ensemble": ensemble.score(data.X_test, data.y_test),
    }
    models = {**final_models(fitted, X_public, seed, n_trees),
              **distilled_ensembles(ensemble, X_public, seed, n_trees)}
    for name, model in models.items():
        results[name] = np.mean(model.classes_[model.predict_proba(data.X_test).argmax(1)]
                                == codes)
    return dataset, beta, results


def main(argv=None):
    command = parser(__doc__, seeds=3, n_jobs=2, trees=50)
    command.add_argument("--datasets", nargs="+", choices=["digits", "wine", "breast_cancer"],
                         default=["digits", "wine", "breast_cancer"])
    command.add_argument("--betas", nargs="+", type=float, default=[0.5])
    command.add_argument("--census-path", help="UCI adult.data or LIBSVM a9a (not shipped): "
                         "adds the census task, 50 parties")
    args = command.parse_args(argv)
    datasets = args.datasets + (["adult"] if args.census_path else [])

    start = time.perf_counter()
    runs = run_parallel(
        (delayed(run_seed)(dataset, beta, seed, args.trees, args.census_path)
         for dataset in datasets for beta in args.betas for seed in range(args.seeds)),
        args.n_jobs, "splits (dataset, beta, seed)")
    table = defaultdict(list)
    for dataset, beta, results in runs:
        table[dataset, beta].append(results)
    methods = list(runs[0][2])
    print(f"FedKT's final model learned anew from its students' pooled vote; random forests "
          f"({args.trees} trees, depth 6); test accuracy, mean ± std over {args.seeds} "
          "seeds\n")
    print_table(["method", *(f"{dataset}, beta {beta:g}" for dataset, beta in table)], [
        [method, *(mean_std([r[method] for r in rows]) for rows in table.values())]
        for method in methods
    ])
    print(f"\ntotal {time.perf_counter() - start:.0f} s")


def figure(results):
    """How each way of teaching the final model does against the default, on every
    dataset and beta, from the stored table of `main` (points of accuracy)."""
    header, rows = results["tables"][0]["header"], results["tables"][0]["rows"]
    means = np.array([[cell_number(cell) for cell in row[1:]] for row in rows])
    gain = 100 * (means - means[0])  # the first row is the default
    fig, axes = new_figure(1, 1, width=9, height=0.38 * len(rows) + 1.4)
    ax = axes[0][0]
    bound = np.nanmax(np.abs(gain)) or 1
    image = ax.imshow(gain, cmap="RdBu", vmin=-bound, vmax=bound, aspect="auto")
    for (i, j), value in np.ndenumerate(gain):
        if np.isfinite(value):
            ax.text(j, i, f"{value:+.1f}", ha="center", va="center", fontsize="x-small")
    # columns stored as "digits 0.1" name their beta
    columns = [name if "beta" in name else "{}, beta {}".format(*name.rsplit(" ", 1))
               for name in header[1:]]
    ax.set(xticks=range(len(header) - 1), xticklabels=columns,
           yticks=range(len(rows)), yticklabels=[row[0] for row in rows])
    ax.tick_params(axis="x", labelrotation=30)
    fig.colorbar(image, ax=ax, label="points of accuracy against the default")
    return fig


if __name__ == "__main__":
    main()
