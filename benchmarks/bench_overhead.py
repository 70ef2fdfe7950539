"""Overhead of FedKT's orchestration over the base-estimator work it runs.

FedKT's fit wall time is divided by the ideal: the same base-estimator fits and
predictions on the same row subsets, called directly and sequentially, with the
parallelisable part (teachers and students) divided by ``n_jobs`` and the final model's
fit added as it is. Target: at most 1.15 at ``n_jobs=2``.

    python benchmarks/bench_overhead.py [--parties 50] [--rows-per-party 1000] [--n-jobs 2]
"""

import argparse
import time

import numpy as np
from sklearn.base import clone
from sklearn.datasets import make_classification
from sklearn.ensemble import RandomForestClassifier

from skfedkt import FedKTClassifier
from skfedkt._engine._seeds import derived_random_state, draw_seeds
from skfedkt._engine._voting import count_votes, plurality_vote


def direct_work_seconds(X, y, party, X_public, estimator, n_partitions, n_subsets, seed):
    """Seconds of the base-estimator calls FedKT makes, made directly.

    Repeats each party's draws (its noise and tie streams, then its partitions) to
    train on the same row subsets.
    """
    subsets = []
    for p in np.unique(party):
        rng = derived_random_state(seed, "party", p)
        tie_rng = np.random.RandomState(draw_seeds(rng, 2)[1])
        subsets += [s for _ in range(n_partitions) for s in
                    np.array_split(rng.permutation(np.flatnonzero(party == p)), n_subsets)]
    parties = np.unique(party)
    start = time.perf_counter()
    votes = [clone(estimator).fit(X[rows], y[rows]).predict(X_public) for rows in subsets]
    votes = np.array(votes).reshape(len(parties) * n_partitions, n_subsets, -1)
    labels = [plurality_vote(count_votes(v, 2), tie_rng) for v in votes]
    students = [clone(estimator).fit(X_public, lab).predict(X_public) for lab in labels]
    parallel = time.perf_counter() - start
    start = time.perf_counter()
    clone(estimator).fit(X_public, students[0])
    return parallel, time.perf_counter() - start


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--parties", type=int, default=50)
    parser.add_argument("--rows-per-party", type=int, default=1000)
    parser.add_argument("--n-jobs", type=int, default=2)
    args = parser.parse_args()

    n_train = args.parties * args.rows_per_party
    X, y = make_classification(n_samples=int(n_train * 1.125), n_features=20,
                               n_informative=10, random_state=0)
    X_train, y_train, X_public = X[:n_train], y[:n_train], X[n_train:]
    party = np.repeat(np.arange(args.parties), args.rows_per_party)
    forest = RandomForestClassifier(n_estimators=100, max_depth=6)

    parallel, final = direct_work_seconds(X_train, y_train, party, X_public, forest, 2, 5, 0)
    ideal = parallel / args.n_jobs + final
    start = time.perf_counter()
    # the paper's configuration: 5 teachers per partition, hard votes
    FedKTClassifier(forest, voting="hard", n_jobs=args.n_jobs, random_state=0).fit(
        X_train, y_train, groups=party, X_unlabeled=X_public
    )
    actual = time.perf_counter() - start
    print(f"{args.parties} parties x {args.rows_per_party} rows, public set {len(X_public)}, "
          f"{args.parties * 10} random-forest teachers, {args.parties * 2} students")
    print(f"direct base-estimator work: {parallel:.1f} s parallelisable + {final:.2f} s final")
    print(f"ideal at n_jobs={args.n_jobs}: {ideal:.1f} s")
    print(f"FedKTClassifier.fit:       {actual:.1f} s")
    print(f"overhead ratio:            {actual / ideal:.3f} (target <= 1.15)")


if __name__ == "__main__":
    main()
