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

With ``--device`` (``cuda`` on a machine with a GPU, or ``cpu``), a tier's PyTorch
networks (skorch) trained together as one stacked module against one by one, in the
same run (``_device_runs.py``): FedKT's round with the paper's MLP on these splits
(``--device-seeds``, ``--epochs``), each tier's seconds and the accuracy; the
teachers' tier and the whole round on MNIST-sized inputs with the paper's MLP and CNN
(``--device-teachers``, ``--device-epochs``), teachers per second and peak memory;
FedAvg's rounds (``--device-rounds``); a tier of ``--stream-parties`` x 2 x
``--stream-teachers`` teachers streamed in chunks, in a fresh process; the corpus's
MLP-type nets on MNIST-sized rows (``corpus``, stacked; ``--one-by-one`` both ways); a
tier of the paper's and skorch's tutorial CNN, one by one and stacked two ways
(``convolutions``); nets with dropout, stacked and one by one, their accuracy over
``--device-seeds`` seeds (``dropout``). ``--only-device`` prints these tables alone, ``--device-tables``
some of them.

With ``--corpus``, the twelve nets of ``_net_corpus.py`` as people write them on
digits (``_corpus_runs.py``): each one's path, FedKT's round stacked and one by one at
``--n-jobs``, and how far a stacked net's weights are from its separate fit's.

    python benchmarks/bench_networks.py [--seeds 5] [--rounds 30]
    python benchmarks/bench_networks.py --device cpu --only-device
    python benchmarks/bench_networks.py --corpus --only-device
    python benchmarks/bench_networks.py --device cuda --only-device --device-tables corpus

Produces: doc/performance/networks.rst, "Networks in one round" (and
doc/performance/stacked.rst).
"""

import warnings

import numpy as np
from _common import (accuracy_axis, bar_figure, cell_number, cell_spread, log_axis, mean_std,
                     new_figure, paper_number, parser, print_table, run_parallel)
from joblib import delayed
from sklearn.base import clone
from sklearn.neural_network import MLPClassifier

from skfedkt import FedAvgClassifier, FedKTClassifier, OneShotEnsembleClassifier
from skfedkt.baselines import solo_scores
from skfedkt.datasets import load_federated

# the paper's Table 1, MNIST, one round (None: not in the table)
PAPER_MNIST = {name: None if column is None else paper_number("fedkt_table1", "MNIST", column)
               for name, column in [
                   ("FedKT", "FedKT"), ("FedKT, default teachers", None), ("FedAvg", "FedAvg"),
                   ("FedProx", "FedProx"), ("FedDF", "FedDF"), ("SOLO", "SOLO"),
                   ("ensemble of local models", None), ("centralized", None)]}

# the paper's local epochs of FedAvg and FedProx, and FedProx's mu
LOCAL_EPOCHS, MU = 10, 0.1

# the tables of --device (see _device_runs.py)
DEVICE_TABLES = ["fedkt", "mnist", "fedavg", "stream", "corpus", "convolutions", "dropout"]

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
                         help="also time a tier's PyTorch networks trained together "
                              "against one by one on this device (cuda, cpu)")
    command.add_argument("--only-device", action="store_true",
                         help="with --device: only its tables")
    command.add_argument("--device-seeds", type=int, default=None,
                         help="with --device: seeds of its FedKT and FedAvg tables "
                              "(default: --seeds)")
    command.add_argument("--device-teachers", type=int, nargs="+", default=[100, 500],
                         help="with --device: teachers of the MNIST-sized runs")
    command.add_argument("--device-epochs", type=int, default=20,
                         help="with --device: epochs of the MNIST-sized runs")
    command.add_argument("--device-rounds", type=int, default=10,
                         help="with --device: FedAvg's rounds")
    command.add_argument("--device-tables", nargs="+", default=DEVICE_TABLES,
                         choices=DEVICE_TABLES, help="with --device: the tables to print")
    command.add_argument("--stream-parties", type=int, default=20,
                         help="with --device: parties of the tier streamed in chunks")
    command.add_argument("--stream-teachers", type=int, default=50,
                         help="with --device: teachers per partition of that tier "
                              "(2 partitions a party)")
    command.add_argument("--one-by-one", action="store_true",
                         help="with --device's corpus table: also one by one")
    command.add_argument("--corpus", action="store_true",
                         help="the corpus of nets as people write them on digits, on "
                              "--device (default cpu), at --n-jobs")
    args = command.parse_args(argv)
    if args.device_seeds is None:
        args.device_seeds = args.seeds
    if not args.only_device:
        published_tables(args)
    # the tables of torch networks import torch where they run, so that the docs draw
    # this script's figure without it
    if args.corpus:
        from _corpus_runs import corpus_table

        corpus_table(args.device or "cpu", args.n_jobs, args.device_epochs)
    if args.device is not None:
        from _device_runs import run_all

        run_all(args.device, split, args)


def published_tables(args):
    """FedKT against the iterative algorithms in one round, then the rounds."""
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


def figure(results):
    """From the stored tables of `main`: the global model's accuracy after each round
    (its rounds table), or with ``--corpus`` how many times faster each net's round
    runs stacked than one by one."""
    if results["tables"][0]["header"][0] == "net":
        return _corpus_figure(results["tables"][0]["rows"])
    table = next(table for table in results["tables"]
                 if any(name.startswith("round ") for name in table["header"]))
    header, rows = table["header"], table["rows"]
    columns = [i for i, name in enumerate(header) if name.startswith("round ")]
    rounds = [int(header[i].split()[1]) for i in columns]
    fig, axes = new_figure(1, 1, width=7, height=3.6)
    ax = axes[0][0]
    for row in rows:
        means, stds = map(np.array, zip(*(cell_spread(row[i]) for i in columns)))
        ax.plot(rounds, means, marker="o", label=row[0])
        ax.fill_between(rounds, means - stds, means + stds, alpha=0.15)
    log_axis(ax, "x", "round")
    accuracy_axis(ax)
    ax.set(xticks=rounds, xticklabels=rounds)
    ax.minorticks_off()
    ax.legend(fontsize="small")
    return fig


def _corpus_figure(rows):
    return bar_figure([row[0] for row in rows], [cell_number(row[4]) for row in rows],
                      "FedKT's round one by one / stacked (times faster stacked)",
                      reference=1)


if __name__ == "__main__":
    main()
