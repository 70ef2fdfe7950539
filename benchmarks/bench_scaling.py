"""How FedKT's fit time and peak memory grow with rows and with parties.

Every configuration runs in a fresh process. Memory is the main process's peak resident
size above what the interpreter and imports took before the data was made (so it
includes the data), and the
largest loky worker's peak (which includes its own interpreter and imports, about 150
MiB, and reads the data through a shared memory map). Decision-tree teachers keep the run short;
the public set is 1/8 of the training rows, as in the paper's protocol.

    python benchmarks/bench_scaling.py [--n-jobs 2] [--max-rows 1000000]
"""

import argparse
import resource
import subprocess
import sys
import time

import numpy as np


def _peak_mib(who=resource.RUSAGE_SELF):
    """Largest resident memory so far of this process (or of its largest worker)."""
    return resource.getrusage(who).ru_maxrss / 1024


def one(rows, parties, n_jobs):
    from sklearn.tree import DecisionTreeClassifier

    from skfedkt import FedKTClassifier

    baseline = _peak_mib()  # the interpreter and the imports
    # a noisy linear rule, made without large temporaries
    rng = np.random.default_rng(0)
    X = rng.standard_normal((rows + rows // 8, 20))
    y = (X[:, :10].sum(axis=1) + rng.standard_normal(len(X)) > 0).astype(np.int64)
    X_train, y_train, X_public = X[:rows], y[:rows], X[rows:]
    party = np.arange(rows) % parties
    data_mib = (X_train.nbytes + X_public.nbytes) / 2**20
    start = time.perf_counter()
    clf = FedKTClassifier(DecisionTreeClassifier(max_depth=10), voting="hard", n_jobs=n_jobs,
                          random_state=0)
    clf.fit(X_train, y_train, groups=party, X_unlabeled=X_public)
    seconds = time.perf_counter() - start
    models_mib = clf.upload_bytes_.sum() / 2**20
    # reaped workers count in RUSAGE_CHILDREN
    from joblib.externals.loky import get_reusable_executor

    get_reusable_executor().shutdown(wait=True)
    print(f"{rows},{parties},{seconds:.2f},{_peak_mib() - baseline:.0f},"
          f"{_peak_mib(resource.RUSAGE_CHILDREN):.0f},{data_mib:.0f},{models_mib:.1f}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-jobs", type=int, default=2)
    parser.add_argument("--max-rows", type=int, default=1_000_000)
    parser.add_argument("--one", nargs=2, type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        one(*args.one, args.n_jobs)
        return
    configs = [(rows, 50) for rows in (10_000, 100_000, 1_000_000) if rows <= args.max_rows]
    configs += [(100_000, parties) for parties in (10, 200)]
    print(f"{'rows':>9} {'parties':>8} {'fit (s)':>8} {'s/1e5 rows':>11} "
          f"{'main: peak above imports':>25} {'worker peak':>12} {'data':>6} "
          f"{'students':>9}  (MiB)")
    for rows, parties in configs:
        out = subprocess.run(
            [sys.executable, __file__, "--one", str(rows), str(parties),
             "--n-jobs", str(args.n_jobs)],
            capture_output=True, text=True, check=True,
        ).stdout.strip().splitlines()[-1]
        rows, parties, seconds, peak, worker, data, models = out.split(",")
        print(f"{int(rows):>9} {int(parties):>8} {float(seconds):>8.1f} "
              f"{float(seconds) / int(rows) * 1e5:>11.2f} {float(peak):>25.0f} "
              f"{float(worker):>12.0f} {float(data):>6.0f} {float(models):>9.1f}",
              flush=True)


if __name__ == "__main__":
    main()
