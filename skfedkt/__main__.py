"""``python -m skfedkt``: FedKT against its baselines on bundled data.

Follows the FedKT paper's protocol: 75% train / 12.5% public / 12.5% test, training rows
split into parties by a Dirichlet(0.5) label partition. For each dataset and model it
prints the mean and standard deviation over trials of the test accuracy of

- FedKT: two-tier knowledge transfer across the parties (one round);
- SOLO: every party trains alone (mean over parties);
- PATE: FedKT with a single party holding all training rows (centralized PATE);
- Centralized: one model on all training rows (the upper bound).
"""

import argparse
import sys
import time

import numpy as np
from sklearn.base import clone
from sklearn.datasets import load_breast_cancer, load_digits
from sklearn.ensemble import RandomForestClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from ._fedkt import FedKTClassifier
from ._fitting import ClassCodeModel
from .datasets import dirichlet_partition

DATASETS = {"digits": (load_digits, 10), "breast_cancer": (load_breast_cancer, 10)}
MODELS = {
    "random forest": RandomForestClassifier(n_estimators=100, max_depth=6),
    "logistic regression": make_pipeline(StandardScaler(), LogisticRegression(max_iter=1000)),
}
ALGORITHMS = ["FedKT", "SOLO", "PATE", "Centralized"]


def solo_accuracy(model, X, y, X_test, y_test):
    """Test accuracy of `model` trained on one party's rows (constant if one class)."""
    classes, codes = np.unique(y, return_inverse=True)
    local = ClassCodeModel.fit(clone(model), X, codes, len(classes))
    return np.mean(classes[local.predict(X_test)] == y_test)


def evaluate(loader, n_parties, model, seed, n_jobs):
    """Test accuracy of every algorithm on one random split."""
    X, y = loader(return_X_y=True)
    X_train, X_rest, y_train, y_rest = train_test_split(
        X, y, train_size=0.75, stratify=y, random_state=seed
    )
    X_public, X_test, _, y_test = train_test_split(
        X_rest, y_rest, test_size=0.5, stratify=y_rest, random_state=seed
    )
    party = dirichlet_partition(y_train, n_parties, beta=0.5, random_state=seed)
    fedkt = FedKTClassifier(model, n_jobs=n_jobs, random_state=seed)
    solo = [
        solo_accuracy(model, X_train[party == p], y_train[party == p], X_test, y_test)
        for p in range(n_parties)
    ]
    return {
        "FedKT": fedkt.fit(X_train, y_train, groups=party, X_unlabeled=X_public).score(
            X_test, y_test
        ),
        "SOLO": np.mean(solo),
        "PATE": clone(fedkt).fit(X_train, y_train, X_unlabeled=X_public).score(X_test, y_test),
        "Centralized": clone(model).fit(X_train, y_train).score(X_test, y_test),
    }


def main(argv=None):
    parser = argparse.ArgumentParser(prog="skfedkt", description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=3, help="random splits per cell")
    parser.add_argument("--n-jobs", type=int, default=-1, help="parallel jobs for FedKT")
    args = parser.parse_args(argv)
    if args.trials < 1:
        parser.error("--trials must be at least 1")

    header = f"{'dataset':<14} {'model':<20}" + "".join(f"{a:>16}" for a in ALGORITHMS)
    print(header)
    print("-" * len(header))
    start = time.perf_counter()
    for name, (loader, n_parties) in DATASETS.items():
        for model_name, model in MODELS.items():
            trials = [
                evaluate(loader, n_parties, model, seed, args.n_jobs)
                for seed in range(args.trials)
            ]
            cells = "".join(
                f"{np.mean([t[a] for t in trials]):>10.3f} ±{np.std([t[a] for t in trials]):.3f}"
                for a in ALGORITHMS
            )
            print(f"{name:<14} {model_name:<20}{cells}", flush=True)
    print(
        f"\n{args.trials} trial(s) per row, Dirichlet(0.5) parties, "
        f"{time.perf_counter() - start:.0f} s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
