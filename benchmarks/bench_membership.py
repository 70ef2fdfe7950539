"""Membership inference against what each method releases (skfedkt.privacy.membership_audit).

For every method, every release (a party's upload, FedCT's shared labels and local
models, the final model) is attacked with the loss-threshold attack and offline LiRA
(``--references`` reference fits), the attacked parties' training rows as members and
as many held-out rows of the same classes as non-members. Two protocols:

- census (``--census-path``, UCI's adult.data or LIBSVM's a9a, not shipped): 50
  Dirichlet(beta) parties, a new 75/12.5/12.5 train/public/holdout split per seed,
  random forests of 100 trees of depth 6 (the paper's), 3 parties attacked per seed;
- breast_cancer (bundled): a 40/20/40 split, 3 Dirichlet(beta) parties, all attacked.

Prints per method and release the AUC of both attacks (mean ± std over seeds and
attacked parties, and the largest), the TPR at 1% false positives, the epsilon the
accountant claims and the test accuracy of the final model. "local forest (full
depth)" is, for scale, what shipping a party's own unrestricted forest reveals.

    python benchmarks/bench_membership.py                          # breast_cancer only
    python benchmarks/bench_membership.py --census-path adult.data --seeds 2
    python benchmarks/bench_membership.py --census-path adult.data --uploads-only
    python benchmarks/bench_membership.py --census-path adult.data --uploads-only \
        --seeds 3 --methods "FedKT (default)" "FedKT, no public copies" \
        "FedKT, soft student labels" "FedKT, one teacher per partition" \
        "FedKT, one teacher, soft student labels"

``--fedct-claim`` instead reproduces the FedCT paper's privacy claim on its own setup
(5 parties, IID): the hard labels FedCT shares against the models that parameter-
sharing methods (and FedCT's final round, by default) hand over.

Produces: doc/performance/privacy.rst, "What leaves whom, and what an attacker learns" (and
doc/user_guide/fedkt.rst, "What a party uploads: students of the public set only").
"""

import time
import warnings
from collections import defaultdict

import numpy as np
from _common import bundled_split, forest, parser, print_table, run_parallel
from joblib import delayed
from sklearn.datasets import load_breast_cancer, load_digits
from sklearn.ensemble import RandomForestClassifier
from sklearn.neural_network import MLPClassifier
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from skfedkt import (
    FedCTClassifier,
    FedKTClassifier,
    OneShotEnsembleClassifier,
    SoftVotes,
)
from skfedkt.datasets import load_federated
from skfedkt.privacy import (
    BitFlips,
    PartyNoise,
    ServerNoise,
    membership_audit,
    party_membership_audit,
)


# method: (the estimator of a seed and forest size, which releases the table shows)
FEDKT_RELEASES = ["upload", "final model"]
FEDCT_RELEASES = ["labels", "local model", "final model"]


def _fedkt(**params):
    """A FedKT method: its estimator of a seed and forest size, and its releases."""
    return (lambda seed, n_trees: FedKTClassifier(forest(n_trees), random_state=seed,
                                                  **params),
            FEDKT_RELEASES)


METHODS = {
    "local forest (full depth)": (
        lambda seed, n_trees: OneShotEnsembleClassifier(
            RandomForestClassifier(n_estimators=n_trees), selection="all",
            random_state=seed),
        ["upload"]),
    "one-shot ensemble": (
        lambda seed, n_trees: OneShotEnsembleClassifier(
            forest(n_trees), selection="all", random_state=seed),
        FEDKT_RELEASES),
    "FedKT (default)": _fedkt(),
    "FedKT, no public copies": _fedkt(voting=SoftVotes(min_public_rows=0)),
    "FedKT, soft student labels": _fedkt(soft_labels="students"),
    "FedKT, five teachers per partition": _fedkt(n_teachers=5),
    "FedKT, three teachers per partition": _fedkt(n_teachers=3),
    "FedKT, two teachers per partition": _fedkt(n_teachers=2),
    "FedKT, one teacher per partition": _fedkt(n_teachers=1),
    "FedKT, one teacher, soft student labels": _fedkt(n_teachers=1, soft_labels="students"),
    "FedKT, students learn party rows": _fedkt(student_data="party+public", n_teachers=1,
                                               soft_labels="students"),
    "FedKT (paper, hard votes)": _fedkt(voting="hard"),
    "FedKT L1 (gamma 0.04, 81 queries)": _fedkt(privacy=ServerNoise(gamma=0.04),
                                                n_students=1),
    "FedKT L2 (gamma 0.04, 81 queries)": _fedkt(privacy=PartyNoise(gamma=0.04),
                                                n_students=1),
    "FedCT": (
        lambda seed, n_trees: FedCTClassifier(forest(n_trees), n_rounds=5,
                                              random_state=seed),
        FEDCT_RELEASES),
    "FedCT, BitFlips(5)": (
        lambda seed, n_trees: FedCTClassifier(
            forest(n_trees), n_rounds=5, privacy=BitFlips(5.0), random_state=seed),
        FEDCT_RELEASES),
}
# the paper's 1% of its public set (81 of 8,140 rows) at the private levels
PRIVATE_QUERIES = 81


def census(path, beta, seed):
    data = load_federated("adult", path=path, n_parties=50, beta=beta, min_party_size=5,
                          random_state=seed)
    attacked = np.random.RandomState(seed).choice(np.unique(data.groups), 3, replace=False)
    return data, attacked


def breast_cancer(beta, seed):
    data = bundled_split(load_breast_cancer, 3, beta, seed)
    return data, np.unique(data.groups)


def audit_method(protocol, beta, seed, method, n_references, estimator=None,
                 uploads_only=False, n_trees=100):
    """One method on one split: [(protocol, method, release, attack, auc, tpr, eps, acc)]."""
    data, attacked = protocol(beta, seed)
    make, releases = METHODS[method]
    model = make(seed, n_trees)
    if estimator is not None:
        model.set_params(estimator=estimator)
    if "queries" in method:
        model.set_params(privacy__query_fraction=PRIVATE_QUERIES / len(data.X_public))
    if uploads_only:
        return audit_uploads(protocol, data, attacked, seed, method, model, n_references)
    audit = fit_and_audit(model, data, attacked, n_references, seed)
    accuracy = model.score(data.X_test, data.y_test)
    return [(protocol.__name__, method, r.release, r.attack, r.auc, r.tpr_at_1pct_fpr,
             r.epsilon, accuracy)
            for r in audit.results if r.release in releases]


def fit_and_audit(model, data, attacked, n_references, seed):
    """Fit `model` on a split's parties and attack every release of the `attacked`
    parties (the held-out rows as non-members): its `membership_audit`."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model.fit(data.X_train, data.y_train, groups=data.groups, X_unlabeled=data.X_public)
        return membership_audit(
            model, data.X_train, data.y_train, groups=data.groups, X_unlabeled=data.X_public,
            X_holdout=data.X_test, y_holdout=data.y_test, parties=attacked,
            n_reference=n_references, random_state=seed,
        )


def audit_uploads(protocol, data, attacked, seed, method, model, n_references):
    """Each attacked party's upload alone, its reference fits rerunning its party step."""
    classes = np.unique(data.y_train)
    rows = []
    for party in attacked:
        mine = data.groups == party
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            audit = party_membership_audit(
                model, data.X_train[mine], data.y_train[mine], party=party, classes=classes,
                X_unlabeled=data.X_public, X_holdout=data.X_test, y_holdout=data.y_test,
                party_seed=seed, n_reference=n_references, random_state=seed,
            )
        rows += [(protocol.__name__, method, r.release, r.attack, r.auc, r.tpr_at_1pct_fpr,
                  r.epsilon, np.nan) for r in audit.results if r.release == "upload"]
    return rows


def main(argv=None):
    command = parser(__doc__, n_jobs=2, trees=100)
    command.add_argument("--census-path", help="UCI adult.data or LIBSVM a9a (not shipped)")
    command.add_argument("--beta", type=float, default=0.5)
    command.add_argument("--seeds", type=int, default=None,
                         help="seeds per protocol (default: 2 census, 5 breast_cancer)")
    command.add_argument("--references", type=int, default=4, help="LiRA's reference fits")
    command.add_argument("--methods", nargs="+", choices=list(METHODS), default=list(METHODS))
    command.add_argument("--fedct-claim", action="store_true",
                         help="reproduce the FedCT paper's claim instead (5 IID parties)")
    command.add_argument("--uploads-only", action="store_true",
                         help="attack only the parties' uploads, rerunning the party step "
                         "alone for the reference fits (party_membership_audit): much "
                         "faster on census; no final model, no accuracy")
    args = command.parse_args(argv)
    start = time.perf_counter()
    if args.fedct_claim:
        fedct_claim(args)
    else:
        protocols = [(breast_cancer, args.seeds or 5)]
        if args.census_path:
            def census_protocol(beta, seed):
                return census(args.census_path, beta, seed)

            census_protocol.__name__ = "census"
            protocols.insert(0, (census_protocol, args.seeds or 2))
        methods = [method for method in args.methods
                   if not args.uploads_only or "upload" in METHODS[method][1]]
        runs = run_parallel(
            (delayed(audit_method)(protocol, args.beta, seed, method, args.references,
                                   uploads_only=args.uploads_only, n_trees=args.trees)
             for protocol, n_seeds in protocols for seed in range(n_seeds)
             for method in methods),
            args.n_jobs, "audits (protocol, seed, method)")
        print_results([row for rows in runs for row in rows], args)
    print(f"\ntotal {time.perf_counter() - start:.0f} s")


def print_results(rows, args):
    table = defaultdict(list)
    for protocol, method, release, attack, auc, tpr, epsilon, accuracy in rows:
        table[protocol, method, release, attack].append((auc, tpr, epsilon, accuracy))
    print(f"Membership inference, Dirichlet(beta={args.beta:g}) parties, {args.references} "
          "reference fits for LiRA; AUC mean ± std over seeds and attacked parties "
          "(largest), TPR at 1% FPR (mean); accuracy: the final model's\n")
    keys = sorted({key[:3] for key in table}, key=lambda k: (
        k[0], list(METHODS).index(k[1]), k[2]))
    print_table(
        ["protocol", "method", "release", "loss AUC", "LiRA AUC", "LiRA TPR@1%", "epsilon",
         "accuracy"],
        [[protocol, method, release, *(
            f"{np.mean(a):.3f} ± {np.std(a):.3f} ({np.max(a):.2f})"
            for a in ([v[0] for v in table[protocol, method, release, attack]]
                      for attack in ("loss", "lira"))
        ), f"{np.mean([v[1] for v in table[protocol, method, release, 'lira']]):.3f}",
          f"{table[protocol, method, release, 'loss'][0][2]:.3g}",
          accuracy_cell([v[3] for v in table[protocol, method, release, 'loss']])]
         for protocol, method, release in keys],
    )


def accuracy_cell(accuracies):
    return "-" if np.isnan(accuracies).all() else f"{np.mean(accuracies):.3f}"


CLAIM_METHODS = {
    "FedCT: shared hard labels": ("FedCT", "labels"),
    "FedCT: final local model (shared by default)": ("FedCT", "local model"),
    "model sharing: a party's local model": ("one-shot ensemble", "upload"),
}


def fedct_claim(args):
    """The FedCT paper's Table 1 setup: 5 parties, IID rows; vulnerability is the AUC."""
    def iid(name):
        def protocol(beta, seed):
            data = bundled_split(load_digits if name == "digits" else load_breast_cancer, 5,
                                 None, seed)
            return data, np.unique(data.groups)

        protocol.__name__ = name
        return protocol

    estimators = {
        "random forest": lambda: forest(args.trees),
        "neural network": lambda: make_pipeline(
            StandardScaler(), MLPClassifier(hidden_layer_sizes=(100, 100), max_iter=500)),
    }
    jobs = [(dataset, estimator_name, method, seed)
            for dataset in ("breast_cancer", "digits") for estimator_name in estimators
            for method in ("FedCT", "one-shot ensemble")
            for seed in range(args.seeds or 3)]
    runs = run_parallel(
        (delayed(audit_method)(iid(dataset), None, seed, method, args.references,
                               estimators[estimator_name]())
         for dataset, estimator_name, method, seed in jobs),
        args.n_jobs, "audits (dataset, model, method, seed)")
    table = defaultdict(list)
    for (dataset, estimator_name, *_), rows in zip(jobs, runs):
        for _, method, release, attack, auc, *_ in rows:
            table[dataset, estimator_name, method, release, attack].append(auc)
    print("The FedCT paper's claim: vulnerability (membership-attack AUC) of what is "
          "shared; 5 IID parties, mean ± std over seeds and parties\n")
    print_table(
        ["dataset", "model", "what is shared", "loss AUC", "LiRA AUC"],
        [[dataset, estimator_name, shown, *(
            f"{np.mean(table[dataset, estimator_name, method, release, attack]):.3f} ± "
            f"{np.std(table[dataset, estimator_name, method, release, attack]):.3f}"
            for attack in ("loss", "lira"))]
         for dataset in ("breast_cancer", "digits") for estimator_name in estimators
         for shown, (method, release) in CLAIM_METHODS.items()],
    )


if __name__ == "__main__":
    main()
