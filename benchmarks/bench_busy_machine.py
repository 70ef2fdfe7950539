"""A busy machine: FedKT's round while other processes keep the cores busy, with
PyTorch networks against the same networks fitted one by one in the same process, and
with XGBoost and HistGradientBoosting at their default threads against one thread.

digits (bundled; pixels scaled by 16), ``--parties`` Dirichlet(0.5) parties, s = 2
partitions of t = 5 teachers, hard votes, the FedKT paper's MLP as a skorch net,
``--epochs`` epochs for every network, ``n_jobs=1``. ``--busy`` CPU-bound processes
(Python loops) run beside it for the whole measurement, which runs in a child process
whose environment sets no thread count (no ``OMP_NUM_THREADS``), as a user's would:

- FedKT as it comes (a tier's networks trained together, each clone fit on one
  thread), and under ``skfedkt.config_context(stack_networks=False)`` (one by one,
  each on one thread);
- the same networks (as many, on as many rows, for as many epochs; the students'
  labels aside) fitted one by one with skorch in a plain loop, with torch's default
  threads, as a user would fit them by hand;
- ``--models boosting``: FedKT's default round (``n_jobs=None``) with
  ``XGBClassifier()`` on wine and ``HistGradientBoostingClassifier()`` on
  breast_cancer (4 parties, the first 40 rows public), each at its default threads
  and set to one thread (``n_jobs=1``; HistGradientBoosting's OpenMP limited to one
  thread around the fit, as ``OMP_NUM_THREADS=1`` would).

    python benchmarks/bench_busy_machine.py [--models networks boosting] [--busy 2]
        [--epochs 20] [--parties 10]

Produces: doc/performance/overhead.rst, "Threads on a busy machine".
"""

import argparse
import copy
import json
import os
import subprocess
import sys
import time
import warnings

import numpy as np
from _common import parser, print_table, progress

from skfedkt import FedKTClassifier, HardVotes, config_context


def _split(n_parties, seed=0):
    from skfedkt.datasets import load_federated

    data = load_federated("digits", n_parties=n_parties, beta=0.5, random_state=seed)
    return data, data.X_train / 16, data.X_public / 16


def _by_hand(net, X, y, groups, X_public, seed):
    """The round's networks fitted one by one in a loop: per party 2 x 5 teachers on
    its rows, 2 students on the public rows, then one final model."""
    rng = np.random.RandomState(seed)
    labels = np.arange(len(X_public)) % 10
    fits = []
    for party in np.unique(groups):
        rows = np.flatnonzero(groups == party)
        fits += [(X[subset], y[subset]) for _ in range(2)
                 for subset in np.array_split(rng.permutation(rows), 5)]
        fits += [(X_public, labels)] * 2
    fits.append((X_public, labels))
    import torch

    for index, (rows, y) in enumerate(fits):
        torch.manual_seed(index)
        copy.deepcopy(net).fit(rows, y)
    return len(fits)


RUNS = ("FedKT", "FedKT, stack_networks=False", "the same networks by hand")
BOOSTING_RUNS = ("XGBClassifier()", "XGBClassifier(n_jobs=1)",
                 "HistGradientBoostingClassifier()",
                 "HistGradientBoostingClassifier(), one OpenMP thread")


def boosting_child():
    """FedKT's default round with each boosting model, at its default threads and at
    one: one JSON line per run, as it ends."""
    from sklearn.datasets import load_breast_cancer, load_wine
    from sklearn.ensemble import HistGradientBoostingClassifier
    from threadpoolctl import threadpool_limits
    from xgboost import XGBClassifier

    for run in BOOSTING_RUNS:
        xgboost = run.startswith("XGB")
        X, y = (load_wine if xgboost else load_breast_cancer)(return_X_y=True)
        model = (XGBClassifier(n_jobs=1 if "n_jobs" in run else None) if xgboost
                 else HistGradientBoostingClassifier())
        with warnings.catch_warnings(), threadpool_limits(1 if "one" in run else None):
            warnings.simplefilter("ignore")
            start = time.perf_counter()
            FedKTClassifier(model, random_state=0).fit(
                X[40:], y[40:], groups=np.arange(len(y) - 40) % 4, X_unlabeled=X[:40])
        print(json.dumps(dict(run=run, seconds=time.perf_counter() - start)), flush=True)


def child(epochs, n_parties):
    """The measurements, in this process (no thread setting in its environment),
    after a small fit that pays torch's first-use costs (imports, kernels): one JSON
    line per run, as it ends."""
    from _torch_nets import paper_net

    data, X, X_public = _split(n_parties)
    net = paper_net("cpu", epochs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        FedKTClassifier(paper_net("cpu", 1), n_students=2, n_teachers=2).fit(
            X[:200], data.y_train[:200], groups=data.groups[:200] % 2,
            X_unlabeled=X_public[:50])
        for run in RUNS:
            start = time.perf_counter()
            if run == "the same networks by hand":
                n_networks = _by_hand(net, X, data.y_train, data.groups, X_public, 0)
            else:
                clf = FedKTClassifier(net, n_students=2, n_teachers=5, voting=HardVotes(),
                                      n_jobs=1, random_state=0)
                with config_context(stack_networks=run == "FedKT"):
                    clf.fit(X, data.y_train, groups=data.groups, X_unlabeled=X_public)
                n_networks = sum(tier["clones"] for tier in clf.tier_fits_)
            print(json.dumps(dict(run=run, seconds=time.perf_counter() - start,
                                  networks=n_networks)), flush=True)


def main(argv=None):
    command = parser(__doc__)
    command.add_argument("--busy", type=int, default=2,
                         help="CPU-bound processes running beside the measurement")
    command.add_argument("--epochs", type=int, default=20, help="epochs of every network")
    command.add_argument("--parties", type=int, default=10, help="parties")
    command.add_argument("--models", nargs="+", choices=["networks", "boosting"],
                         default=["networks", "boosting"], help="what FedKT's round fits")
    command.add_argument("--child", choices=["networks", "boosting"], help=argparse.SUPPRESS)
    args = command.parse_args(argv)
    if args.child == "networks":
        child(args.epochs, args.parties)
        return
    if args.child == "boosting":
        boosting_child()
        return
    environment = {key: value for key, value in os.environ.items()
                   if not key.endswith("_NUM_THREADS")}
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
            for _ in range(args.busy)]
    try:
        measured = {kind: _measure(kind, args, environment) for kind in args.models}
    finally:
        for process in busy:
            process.kill()
    if "networks" in measured:
        networks = measured["networks"]
        by_hand = networks["the same networks by hand"]["seconds"]
        print(f"FedKT's round on digits ({args.parties} parties, s = 2, t = 5, hard votes, "
              f"{networks['FedKT']['networks']} networks of the paper's MLP, {args.epochs} "
              f"epochs, n_jobs=1) on {os.cpu_count()} cores with {args.busy} CPU-bound "
              "processes beside it, no thread count set\n")
        print_table(["run", "seconds", "against the networks by hand"],
                    [[run, f"{value['seconds']:.1f}", f"{value['seconds'] / by_hand:.2f}"]
                     for run, value in networks.items()])
    if "boosting" in measured:
        boosting = {run: value["seconds"] for run, value in measured["boosting"].items()}
        one_thread = {"XGBClassifier()": boosting["XGBClassifier(n_jobs=1)"],
                      "HistGradientBoostingClassifier()": boosting[BOOSTING_RUNS[-1]]}
        print(f"\nFedKT's default round (n_jobs=None; wine, breast_cancer: 4 parties) on "
              f"{os.cpu_count()} cores with {args.busy} CPU-bound processes beside it, no "
              "thread count set\n")
        print_table(["model", "seconds", "against one thread"],
                    [[run, f"{seconds:.1f}",
                      f"{seconds / one_thread[run]:.2f}" if run in one_thread else "1.00"]
                     for run, seconds in boosting.items()])


def _measure(kind, args, environment):
    """The runs of `kind`, each a JSON line of a child process whose environment sets
    no thread count."""
    runs = RUNS if kind == "networks" else BOOSTING_RUNS
    measured = {}
    with subprocess.Popen(
            [sys.executable, __file__, "--child", kind, "--epochs", str(args.epochs),
             "--parties", str(args.parties)],
            env=environment, stdout=subprocess.PIPE, text=True,
            cwd=os.path.dirname(os.path.abspath(__file__))) as measuring:
        for line in progress(measuring.stdout, f"busy machine, {kind}", total=len(runs)):
            result = json.loads(line)
            measured[result.pop("run")] = result
    if measuring.returncode:
        raise RuntimeError(f"the measurements failed (exit {measuring.returncode})")
    return measured


if __name__ == "__main__":
    main()
