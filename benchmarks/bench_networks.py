"""Networks: FedKT against the iterative algorithms in one round (the FedKT paper's
Table 1, network columns) and as their first round (its Figure 2, FedKT-Prox).

digits (bundled; pixels scaled to [0, 1] by their range, 16) with the FedKT paper's
MLP (two hidden layers of 100 ReLU units, Adam, learning rate 0.001, batch 32), 10
Dirichlet(0.5) parties, a 75/12.5/12.5 train/public/test split, ``--seeds`` new splits.

One round:

- FedKT: the paper's s = 2 partitions of t = 5 teachers, ``--epochs`` epochs for every
  network (the paper: 100), the package's defaults otherwise; and with the package's
  default teachers (``n_teachers="auto"``: 3 on these parties);
- FedAvg, FedProx (mu 0.1) and FedDF (the average distilled on the public set for
  ``--epochs`` epochs), one round of 10 local epochs (the paper's);
- SOLO: a party's own model, mean over parties; the ensemble of the parties' local
  models (their probabilities averaged); centralized: one model on all training rows.

Rounds (``--rounds``, the paper's 50 for MNIST): FedAvg, FedProx and FedKT-Prox (FedKT
as the first round of FedProx), the global model's test accuracy after each round
(`FedAvgClassifier.staged_score`), the round at which each mean curve first reaches
what FedAvg's reaches after all of them, and on how many seeds the method reaches, a
third of the way, what FedAvg reaches on the same seed after all of them (the paper's
Figure 2 claim). FedKT-Prox twice: with the paper's FedKT as its first round (s = 2,
t = 5, every network ``--epochs`` epochs), and with the package's default teachers and
a final model trained as long as a round's local training (10 epochs), which a
round's training continues better than a model fitted ``--epochs`` epochs to the
public set (chosen on seeds 10-12, apart from the seeds shown).

Mean ± std of the test accuracy over seeds, the paper's MNIST column beside (it has no
digits row).

With ``--device`` (``cuda`` on a machine with a GPU, or ``cpu``), FedKT's round again
with the paper's MLP as a PyTorch network (skorch) on that device, its 100 teachers
trained one after the other in one process (``n_jobs=1``) and by two worker processes
sharing the device (``n_jobs=2``): wall time, teachers per second, test accuracy and,
in one process, the device memory torch held at its peak.

    python benchmarks/bench_networks.py [--seeds 5] [--rounds 30] [--device cuda]

Produces: doc/performance.rst, "Networks in one round".
"""

import time
import warnings

import numpy as np
from _common import mean_std, parser, print_table, run_parallel
from joblib import delayed
from sklearn.base import clone
from sklearn.neural_network import MLPClassifier

from skfedkt import FedAvgClassifier, FedKTClassifier, OneShotEnsembleClassifier
from skfedkt.baselines import solo_scores
from skfedkt.datasets import load_federated

# the paper's Table 1, MNIST, one round (None: not in the table)
PAPER_MNIST = {"FedKT": 0.905, "FedKT, default teachers": None, "FedAvg": 0.628, "FedProx": 0.443, "FedDF": 0.838,
               "SOLO": 0.690, "ensemble of local models": None, "centralized": None}

# the paper's local epochs of FedAvg and FedProx, and FedProx's mu
LOCAL_EPOCHS, MU = 10, 0.1

# the rounds at which the table of the accuracy against rounds shows the curves
SHOWN_ROUNDS = (1, 2, 3, 5, 10, 20, 30, 50)


def paper_mlp(epochs):
    return MLPClassifier(hidden_layer_sizes=(100, 100), batch_size=32, max_iter=epochs)


def fedkt(mlp):
    return FedKTClassifier(mlp, n_students=2, n_teachers=5)


def first_round(mlp, final_epochs):
    """FedKT as FedProx's first round: the default teachers, and a final model trained
    `final_epochs` epochs (a round's local training: it is where the rounds start)."""
    return FedKTClassifier(mlp, n_students=2,
                           final_estimator=clone(mlp).set_params(max_iter=final_epochs))


def iterative(mlp, epochs, n_rounds, final_epochs=LOCAL_EPOCHS):
    """The iterative algorithms (one estimator, four settings), `n_rounds` rounds."""
    fedavg = FedAvgClassifier(mlp, n_rounds=n_rounds, local_epochs=LOCAL_EPOCHS)
    fedprox = clone(fedavg).set_params(proximal_mu=MU)
    return {
        "FedAvg": fedavg,
        "FedProx": fedprox,
        "FedDF": clone(fedavg).set_params(distill_epochs=epochs),
        "FedKT-Prox, the paper's FedKT": clone(fedprox).set_params(init=fedkt(mlp)),
        "FedKT-Prox": clone(fedprox).set_params(init=first_round(mlp, final_epochs)),
    }


def split(seed, n_parties):
    data = load_federated("digits", n_parties=n_parties, beta=0.5, random_state=seed)
    return data, data.X_train / 16, data.X_public / 16, data.X_test / 16


def one_round(seed, epochs, n_parties):
    """Every method's test accuracy after one round."""
    data, X, X_public, X_test = split(seed, n_parties)
    mlp = paper_mlp(epochs)
    methods = {
        "FedKT": fedkt(mlp),
        "FedKT, default teachers": FedKTClassifier(mlp, n_students=2),
        **{name: clf for name, clf in iterative(mlp, epochs, 1).items()
           if not name.startswith("FedKT-Prox")},
        "ensemble of local models": OneShotEnsembleClassifier(mlp, selection="all"),
    }
    scores = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # small parties: clipped batches, short training
        for name, clf in methods.items():
            scores[name] = clf.set_params(random_state=seed).fit(
                X, data.y_train, groups=data.groups, X_unlabeled=X_public,
            ).score(X_test, data.y_test)
        scores["SOLO"] = solo_scores(mlp, X, data.y_train, data.groups, X_test,
                                     data.y_test, random_state=seed).mean()
        scores["centralized"] = clone(mlp).set_params(random_state=seed).fit(
            X, data.y_train).score(X_test, data.y_test)
    return scores


def by_round(seed, epochs, n_rounds, n_parties, final_epochs):
    """FedAvg's, FedProx's and FedKT-Prox's test accuracy after each round."""
    data, X, X_public, X_test = split(seed, n_parties)
    curves = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, clf in iterative(paper_mlp(epochs), epochs, n_rounds,
                                   final_epochs).items():
            if name == "FedDF":
                continue
            clf.set_params(random_state=seed).fit(X, data.y_train, groups=data.groups,
                                                  X_unlabeled=X_public)
            curves[name] = list(clf.staged_score(X_test, data.y_test))
    return curves


def on_device(device, epochs, n_jobs, n_parties):
    """FedKT's round with the paper's MLP as a skorch net on `device`: wall time,
    teachers per second, accuracy and (in one process) peak device memory."""
    import torch
    from _torch_nets import paper_net

    data, X, X_public, X_test = split(0, n_parties)
    clf = FedKTClassifier(paper_net(device, epochs), n_students=2, n_teachers=5,
                          n_jobs=n_jobs, random_state=0)
    if device.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        start = time.perf_counter()
        clf.fit(X, data.y_train, groups=data.groups, X_unlabeled=X_public)
        seconds = time.perf_counter() - start
    teachers = int(clf.n_teachers_.sum()) * clf.n_students
    memory = (f"{torch.cuda.max_memory_allocated() / 2**20:.0f}"
              if device.startswith("cuda") and n_jobs == 1 else "-")
    return [device, n_jobs, f"{seconds:.1f}", f"{teachers / seconds:.1f}",
            f"{clf.score(X_test, data.y_test):.3f}", memory]


def first_round_reaching(curve, target):
    """The first round (1-based) whose accuracy reaches `target`, or None."""
    reached = np.flatnonzero(np.asarray(curve) >= target)
    return int(reached[0]) + 1 if reached.size else None


def main(argv=None):
    command = parser(__doc__, seeds=5, n_jobs=2)
    command.add_argument("--epochs", type=int, default=100,
                         help="epochs of FedKT's networks, FedDF's distillation and the "
                              "one-shot baselines (the paper's 100)")
    command.add_argument("--rounds", type=int, default=30,
                         help="rounds of FedAvg, FedProx and FedKT-Prox in the series")
    command.add_argument("--parties", type=int, default=10,
                         help="parties (the paper's 10)")
    command.add_argument("--first-seed", type=int, default=0,
                         help="the first seed: seeds first-seed, first-seed + 1, ...")
    command.add_argument("--final-epochs", type=int, default=LOCAL_EPOCHS,
                         help="epochs of the final model of FedKT-Prox's first round")
    command.add_argument("--device", default=None,
                         help="also time FedKT with a PyTorch network on this device "
                              "(cuda, cpu)")
    command.add_argument("--device-jobs", type=int, nargs="+", default=[1, 2],
                         help="with --device: the n_jobs to time (worker processes "
                              "sharing the device)")
    args = command.parse_args(argv)
    seeds = range(args.first_seed, args.first_seed + args.seeds)
    runs = run_parallel((delayed(one_round)(seed, args.epochs, args.parties) for seed in seeds),
                        args.n_jobs, "one round")
    print(f"digits, {args.parties} Dirichlet(0.5) parties, the paper's MLP, one round: test "
          f"accuracy, "
          f"mean ± std over {args.seeds} seeds\n")
    print_table(["method", "accuracy", "paper (MNIST)"], [
        [name, mean_std([scores[name] for scores in runs]),
         "-" if PAPER_MNIST[name] is None else f"{PAPER_MNIST[name]:.3f}"]
        for name in PAPER_MNIST
    ])

    series = run_parallel((delayed(by_round)(seed, args.epochs, args.rounds, args.parties,
                                             args.final_epochs)
                           for seed in seeds), args.n_jobs, "rounds")
    curves = {name: np.array([run[name] for run in series]) for name in series[0]}
    shown = [r for r in SHOWN_ROUNDS if r <= args.rounds]
    fedavg_last = curves["FedAvg"][:, -1]
    third = max(1, args.rounds // 3)
    print(f"\nthe global model's test accuracy after each round, mean ± std over "
          f"{args.seeds} seeds; then the first round whose mean accuracy reaches FedAvg's "
          f"after {args.rounds} rounds ({fedavg_last.mean():.3f}), and the seeds on which "
          f"round {third} reaches FedAvg's round {args.rounds} on the same seed\n")
    print_table(["method", *[f"round {r}" for r in shown], "rounds to FedAvg's last",
                 f"seeds: round {third} ≥ FedAvg's last"], [
        [name, *[mean_std(curve[:, r - 1]) for r in shown],
         first_round_reaching(curve.mean(axis=0), fedavg_last.mean()) or f"> {args.rounds}",
         f"{np.sum(curve[:, third - 1] >= fedavg_last)} of {args.seeds}"]
        for name, curve in curves.items()
    ])
    if args.device is not None:
        print(f"\nFedKT's round ({10 * args.parties} teachers, {2 * args.parties} students, "
              f"the final model) with the paper's MLP as a PyTorch network, {args.epochs} "
              "epochs, one split\n")
        print_table(["device", "n_jobs", "wall time (s)", "teachers per second",
                     "accuracy", "peak device memory (MiB)"],
                    [on_device(args.device, args.epochs, n_jobs, args.parties)
                     for n_jobs in args.device_jobs])


if __name__ == "__main__":
    main()
