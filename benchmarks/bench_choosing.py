"""Every algorithm and the baselines side by side: accuracy against what each releases.

For each dataset (the bundled digits, breast_cancer and wine; census with
``--census-path``), several seeds each draw a 40/20/40 train/public/held-out split and
Dirichlet(``--beta``) parties (census: 50 parties and the 75/12.5/12.5 split of
``load_federated``), fit every method with random forests (``--trees`` trees, depth 6;
FedAvg the paper's MLP on standardised features), and attack every release the fit
lets out with ``membership_audit``: the loss attack and offline LiRA (``--references``
reference fits, each a refit of the whole protocol), the attacked parties' rows as
members. Prints, per dataset and method, mean ± std over seeds: test accuracy, the AUC
of both attacks on the most revealing of a party's own releases (its upload, its
shared labels or probabilities, or its local model; FedAvg's weights of the last round)
and LiRA's on the final model, the epsilon the accountant states, rounds, KiB a party
sends in all (FedCT's and DS-FL's: what they share each round, without the model each
party sends for the vote), and what the final model is. Beside the baselines (each party alone, one model on all rows), *central,
public size*: one forest on as many correctly labelled training rows as the public set
holds, about the best a model distilled on the public set alone can do.

    python benchmarks/bench_choosing.py                      # bundled sets, 3 seeds
    python benchmarks/bench_choosing.py --census-path adult.data --datasets census

Produces: doc/user_guide/choosing.rst, "Accuracy against what each method reveals".
"""

from functools import partial

import numpy as np
from _common import (accuracy_axis, bundled_split, cell_spread, forest, mean_std,
                     new_figure, parser, print_table, runs_by_dataset_and_method)
from bench_membership import fit_and_audit
from sklearn.datasets import load_breast_cancer, load_digits, load_wine
from sklearn.impute import SimpleImputer
from sklearn.neural_network import MLPClassifier
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils import Bunch

from skfedkt import (
    DSFLClassifier,
    FedAvgClassifier,
    FedCTClassifier,
    FedKTClassifier,
    OneShotEnsembleClassifier,
)
from skfedkt.baselines import solo_scores
from skfedkt.datasets import load_federated
from skfedkt.privacy import PartyNoise, TeacherVotes

BUNDLED = {"digits": (load_digits, 10), "breast_cancer": (load_breast_cancer, 5),
           "wine": (load_wine, 4)}
# method: (its estimator of a seed, forest size and number of parties, what its final
# model is)
METHODS = {
    "FedKT (default)": (lambda seed, trees, _: FedKTClassifier(forest(trees), random_state=seed),
                        "one model"),
    "FedKT (paper, hard votes)": (
        lambda seed, trees, _: FedKTClassifier(forest(trees), voting="hard", random_state=seed),
        "one model"),
    "FedKT L2 (gamma 0.04)": (
        lambda seed, trees, _: FedKTClassifier(forest(trees), privacy=PartyNoise(gamma=0.04),
                                               n_students=1, random_state=seed),
        "one model"),
    "FedCT": (lambda seed, trees, _: FedCTClassifier(forest(trees), n_rounds=5,
                                                     random_state=seed),
              "a model per party, and their vote"),
    "FedCT, TeacherVotes(4)": (
        lambda seed, trees, _: FedCTClassifier(forest(trees), n_rounds=5,
                                               privacy=TeacherVotes(4.0), random_state=seed),
        "a model per party, and their vote"),
    "DS-FL (default)": (lambda seed, trees, _: DSFLClassifier(forest(trees),
                                                             random_state=seed),
                        "a model per party, and their vote"),
    "DS-FL, distilled": (lambda seed, trees, _: DSFLClassifier(forest(trees), distill=True,
                                                              random_state=seed),
                         "one model"),
    "one-shot ensemble (all parties)": (
        lambda seed, trees, _: OneShotEnsembleClassifier(forest(trees), selection="all",
                                                         random_state=seed),
        "every party's model"),
    "one-shot ensemble (cv selection of half)": (
        lambda seed, trees, n_parties: OneShotEnsembleClassifier(
            forest(trees), selection="cv", n_selected=max(1, n_parties // 2),
            random_state=seed),
        "the selected parties' models"),
    # the FedKT paper's FedAvg: its MLP, 10 epochs a round
    "FedAvg (MLP, 10 rounds of 10 epochs)": (
        lambda seed, trees, _: FedAvgClassifier(
            MLPClassifier(hidden_layer_sizes=(100, 100), learning_rate_init=0.001,
                          batch_size=32, random_state=seed),
            n_rounds=10, local_epochs=10, random_state=seed),
        "one model: the averaged weights"),
}
BASELINES = {"SOLO (each party alone)": "a model per party, never shared",
             "centralized (not federated)": "one model on all rows",
             "central, public size (not federated)":
                 "one model on as many labelled rows as the public set"}


def load(dataset, beta, seed, census_path):
    """A split of `dataset`: its federated rows, public set and held-out rows."""
    if dataset == "census":
        return load_federated("adult", path=census_path, n_parties=50, beta=beta,
                              min_party_size=5, random_state=seed)
    return bundled_split(*BUNDLED[dataset], beta, seed)


def run(dataset, beta, seed, method, trees, n_references, census_path):
    """One method on one split: (accuracy, loss AUC, LiRA AUC of a party's releases,
    LiRA AUC of the final model, epsilon, rounds, KiB per party)."""
    data = load(dataset, beta, seed, census_path)
    if method.startswith("FedAvg"):
        # the network's inputs, from the public set for every party: census's missing
        # values as its medians, one scale
        inputs = make_pipeline(SimpleImputer(strategy="median"), StandardScaler()).fit(
            data.X_public)
        scaled = {key: inputs.transform(data[key]) for key in ("X_train", "X_public", "X_test")}
        data = Bunch(**{**data, **scaled})
    if method in BASELINES:
        rows = np.arange(len(data.y_train))
        if method.startswith("central, public size"):  # the public set's ceiling
            rows = np.random.RandomState(seed).choice(rows, len(data.X_public),
                                                      replace=False)
        groups = data.groups if method.startswith("SOLO") else np.zeros(len(rows))
        score = np.mean(solo_scores(forest(trees), data.X_train[rows], data.y_train[rows],
                                    groups, data.X_test, data.y_test, random_state=seed))
        sent = 0.0 if method.startswith("SOLO") else np.nan  # SOLO sends nothing
        return score, np.nan, np.nan, np.nan, np.nan, 0, sent
    parties = np.unique(data.groups)
    model = METHODS[method][0](seed, trees, len(parties))
    attacked = np.random.RandomState(seed).choice(parties, min(3, len(parties)),
                                                  replace=False)
    audit = fit_and_audit(model, data, attacked, n_references, seed)
    party = {r.release for r in audit.results} - {"final model"}
    epsilon = float(getattr(model, "epsilon_", np.inf))
    return (model.score(data.X_test, data.y_test),
            max((audit.auc(release, "loss") for release in party), default=np.nan),
            max((audit.auc(release, "lira") for release in party), default=np.nan),
            audit.auc("final model", "lira"),
            epsilon if np.isfinite(epsilon) else np.nan,
            getattr(model, "n_rounds_", 1),
            float(np.mean(model.upload_bytes_)) / 1024)


def main(argv=None):
    command = parser(__doc__, seeds=3, n_jobs=2, trees=50)
    command.add_argument("--datasets", nargs="+", choices=[*BUNDLED, "census"],
                         default=list(BUNDLED))
    command.add_argument("--census-path", help="UCI adult.data or LIBSVM a9a (not shipped)")
    command.add_argument("--beta", type=float, default=0.5)
    command.add_argument("--references", type=int, default=4, help="LiRA's reference fits")
    command.add_argument("--methods", nargs="+", choices=[*METHODS, *BASELINES],
                         default=[*METHODS, *BASELINES])
    args = command.parse_args(argv)
    if "census" in args.datasets and not args.census_path:
        command.error("--datasets census needs --census-path")
    table = runs_by_dataset_and_method(
        partial(run, beta=args.beta, trees=args.trees, n_references=args.references,
                census_path=args.census_path),
        args.datasets, args.seeds, args.methods, args.n_jobs,
        "fits and audits (dataset, seed, method)")
    print(f"Dirichlet(beta={args.beta:g}) parties, random forests ({args.trees} trees, "
          f"depth 6); mean ± std over {args.seeds} seeds; attack AUCs (0.5: a guess) on "
          f"a party's most revealing release and on the final model, LiRA with "
          f"{args.references} reference fits\n")
    print_table(
        ["dataset", "method", "accuracy", "party: loss AUC", "party: LiRA AUC",
         "final: LiRA AUC", "epsilon", "rounds", "KiB per party", "final model"],
        [[dataset, method, *(_cell([r[k] for r in rows], digits)
                             for k, digits in ((0, 3), (1, 2), (2, 2), (3, 2), (4, 2))),
          f"{np.mean([r[5] for r in rows]):g}", _cell([r[6] for r in rows], 2),
          {**{name: what for name, (_, what) in METHODS.items()}, **BASELINES}[method]]
         for (dataset, method), rows in table.items()])


def _cell(values, digits):
    values = np.asarray(values, dtype=float)
    return "-" if np.isnan(values).all() else mean_std(values, digits)


def figure(results):
    """Accuracy against LiRA's AUC on a party's releases, one panel per dataset and one
    point per method, from the stored table of `main`."""
    header, rows = results["tables"][0]["header"], results["tables"][0]["rows"]
    accuracy, auc = header.index("accuracy"), header.index("party: LiRA AUC")
    datasets = list(dict.fromkeys(row[0] for row in rows))
    fig, axes = new_figure(1, len(datasets), width=3.6 * len(datasets), height=3.6)
    methods = list(dict.fromkeys(row[1] for row in rows if row[auc] != "-"))
    markers = dict(zip(methods, "osD^v<>Ph*"))
    for ax, dataset in zip(axes[0], datasets):
        for row in rows:
            if row[0] == dataset and row[auc] != "-":
                (x, x_std), (y, y_std) = cell_spread(row[auc]), cell_spread(row[accuracy])
                # hollow markers: methods that reveal alike fall on one another
                ax.errorbar(x, y, xerr=x_std, yerr=y_std, marker=markers[row[1]],
                            markerfacecolor="none", capsize=2, label=row[1],
                            linestyle="none")
        ax.axvline(0.5, color="grey", linewidth=1, linestyle="--", label="a guess (AUC 0.5)")
        ax.set(title=dataset, xlabel="LiRA AUC on a party's releases (0.5: a guess)")
        accuracy_axis(ax)
    fig.legend(*axes[0][0].get_legend_handles_labels(), loc="outside lower center",
               ncol=4, fontsize="small")
    return fig


if __name__ == "__main__":
    main()
