"""Scale-out: FedKT fitted through a dask.distributed cluster gives the same model.

All clones are fitted as joblib tasks, so ``joblib.parallel_config("dask")`` sends them
to a dask cluster. This script starts a ``LocalCluster``, fits FedKT there and with
``n_jobs=1``, and compares predictions and time. To use a real cluster, connect a
client to its scheduler instead of a LocalCluster:

    from dask.distributed import Client
    client = Client("tcp://scheduler-address:8786")
    with joblib.parallel_config("dask"):
        clf.fit(X, y, groups=party, X_unlabeled=X_public)

The workers need skfedkt and the base estimator's packages installed, and a model class
importable by name (not defined in ``__main__``).

    python benchmarks/bench_dask.py [--workers 2] [--parties 20] [--trees 50]

Produces: doc/performance/scaling.rst, "Scale-out with Dask".
"""

import time

import numpy as np
from _common import forest, parser, progress
from joblib import parallel_config
from sklearn.datasets import make_classification

from skfedkt import FedKTClassifier


def main(argv=None):
    command = parser(__doc__, trees=50)
    command.add_argument("--workers", type=int, default=2)
    command.add_argument("--parties", type=int, default=20)
    command.add_argument("--rows-per-party", type=int, default=500)
    args = command.parse_args(argv)
    from dask.distributed import Client, LocalCluster

    X, y = make_classification(n_samples=args.parties * args.rows_per_party, n_features=20,
                               random_state=0)
    X_public, X_train, y_train = X[: len(X) // 8], X[len(X) // 8 :], y[len(X) // 8 :]
    party = np.arange(len(y_train)) % args.parties
    clf = FedKTClassifier(forest(args.trees), random_state=0)

    bar = progress(None, "FedKT fits: n_jobs=1, then on the dask cluster", total=2)
    start = time.perf_counter()
    sequential = clf.fit(X_train, y_train, groups=party, X_unlabeled=X_public).predict(X)
    sequential_seconds = time.perf_counter() - start
    bar.update()
    with LocalCluster(n_workers=args.workers, threads_per_worker=1,
                      processes=True) as cluster, Client(cluster):
        start = time.perf_counter()
        with parallel_config("dask"):
            distributed = clf.fit(X_train, y_train, groups=party,
                                  X_unlabeled=X_public).predict(X)
        dask_seconds = time.perf_counter() - start
    bar.update()
    bar.close()
    print(f"n_jobs=1: {sequential_seconds:.1f} s; dask, {args.workers} workers: "
          f"{dask_seconds:.1f} s")
    print(f"identical predictions: {np.array_equal(sequential, distributed)}")


if __name__ == "__main__":
    main()
