"""How far FedKT's server lets its label shares stray from the training's (match_shares).

The server shifts its labels until every class's share is within a tolerance, in
standard errors of sampling, of its share of the training rows (``SHARE_TOLERANCE`` in
``skfedkt/_fedkt/_server.py``). The label-skew benchmark's public sets are stratified, so their
class shares equal the training rows' exactly, which would flatter exact matching; here
every seed gives FedKT a random 70% of the public set instead, whose shares differ by
sampling error. Test accuracy, mean ± std over 5 seeds, for no matching and for
tolerances of 0 (exact shares), 1 and 2 standard errors, on the label-skew benchmark's
tasks with random forests, and on digits with logistic regression (well-calibrated
votes, 10 parties, the first 40% of a 30% public pool).

    python benchmarks/bench_share_tolerance.py
    python benchmarks/bench_share_tolerance.py --datasets digits wine --seeds 3

Produces: doc/performance/defaults.rst, "How far the server's label shares may stray".
"""

import time
import warnings
from collections import defaultdict

import numpy as np
from _common import forest, mean_std, parser, print_table, run_parallel
from bench_label_skew import BETAS, PARTIES, PARTIES_AT, load
from joblib import delayed
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

import skfedkt._fedkt._server
from skfedkt import FedKTClassifier, SoftVotes
from skfedkt.datasets import load_federated

TOLERANCES = [None, 0.0, 1.0, 2.0]  # None: match_shares=False
TASKS = ["digits, logistic regression", *PARTIES]


def split(task, beta, seed, n_trees):
    """(estimator, data, public rows) with a random, unstratified public set."""
    if task == "digits, logistic regression":
        data = load_federated("digits", n_parties=10, beta=beta, public_fraction=0.3,
                              random_state=seed)
        model = make_pipeline(StandardScaler(), LogisticRegression(max_iter=1000))
        return model, data, data.X_public[: int(0.4 * len(data.X_public))]
    data = load(task, PARTIES_AT.get((task, beta), PARTIES[task]), beta, seed)
    kept = np.random.RandomState(seed).rand(len(data.X_public)) < 0.7
    return forest(n_trees), data, data.X_public[kept]


def run(task, beta, seed, tolerance, n_trees=50):
    model, data, public = split(task, beta, seed, n_trees)
    clf = FedKTClassifier(model, voting=SoftVotes(match_shares=tolerance is not None),
                          random_state=seed)
    default = skfedkt._fedkt._server.SHARE_TOLERANCE
    skfedkt._fedkt._server.SHARE_TOLERANCE = 0.0 if tolerance is None else tolerance
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            clf.fit(data.X_train, data.y_train, groups=data.groups, X_unlabeled=public)
    finally:  # a job run in the calling process leaves the constant as it was
        skfedkt._fedkt._server.SHARE_TOLERANCE = default
    return task, beta, tolerance, clf.score(data.X_test, data.y_test)


def main(argv=None):
    command = parser(__doc__, seeds=5, n_jobs=2, trees=50)
    command.add_argument("--datasets", nargs="+", choices=TASKS, default=TASKS)
    command.add_argument("--betas", nargs="+", type=float, default=list(BETAS))
    args = command.parse_args(argv)
    start = time.perf_counter()
    runs = run_parallel(
        (delayed(run)(task, beta, seed, tolerance, args.trees)
         for task in args.datasets for beta in args.betas for seed in range(args.seeds)
         for tolerance in TOLERANCES),
        args.n_jobs, "fits (task, beta, seed, tolerance)")
    scores = defaultdict(list)
    for task, beta, tolerance, score in runs:
        scores[task, beta, tolerance].append(score)
    names = ["no matching" if t is None else f"{t:g} std. errors" for t in TOLERANCES]
    print(f"FedKT test accuracy with random public subsets, mean ± std over {args.seeds} "
          "seeds\n")
    print_table(["task", "beta", *names], [
        [task, f"{beta:g}", *(mean_std(scores[task, beta, t]) for t in TOLERANCES)]
        for task in args.datasets for beta in args.betas
    ])
    print(f"\ntotal {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
