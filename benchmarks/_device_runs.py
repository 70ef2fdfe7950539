"""What ``bench_networks.py --device`` measures: a tier's PyTorch networks (skorch)
trained together as one stacked module (``stack_networks=True``, the default of
``skfedkt.set_config``) against
one by one (``False``), on the same device, in the same run.

- FedKT's round with the paper's MLP on digits (s = 2, t = 5): each tier's seconds
  (``tier_fits_``), the whole round and the test accuracy, per seed;
- MNIST-sized inputs (784 features; the CNN on 3 x 32 x 32 images), 10 or 50 parties
  of a Dirichlet(0.5) split (100 or 500 teachers of about 75 rows), 20 epochs: the
  teachers' tier, teachers per second, the whole round and the peak memory (above
  what the process held before the fit on the CPU; torch's peak allocation on a GPU);
- FedAvg with the paper's MLP on digits: every party's local training stacked;
- a tier of 2,000 small teachers, which streams through the stack in chunks.

Synthetic MNIST-sized rows (``make_classification``) measure time and memory only:
their accuracy means nothing.
"""

import time
import warnings
from contextlib import nullcontext

import numpy as np
from _common import PeakMemory, mean_std, print_table
from _corpus_runs import convolution_table, corpus_device_table, dropout_table
from _torch_nets import paper_cnn, paper_net
from sklearn.datasets import make_classification

from skfedkt import FedAvgClassifier, FedKTClassifier, config_context
from skfedkt._engine._stacking import _tier
from skfedkt.datasets import dirichlet_partition

PATHS = {"stacked": True, "one by one": False}
ROWS_PER_TEACHER, PUBLIC_ROWS, TEST_ROWS = 75, 625, 1000


def _tier_seconds(clf, tier):
    return sum(entry["seconds"] for entry in clf.tier_fits_ if entry["tier"] == tier)


def timed_fit(clf, device, X, y, groups, X_public=None, stack=True):
    """Fit `clf`, its networks stacked or with ``stack_networks=False`` (`stack`); its
    wall time, peak memory (MiB: above what the process held before on the CPU,
    torch's peak allocation on a GPU) and the fitted estimator."""
    on_gpu = device.startswith("cuda")
    if on_gpu:
        import torch

        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    # on a GPU torch counts its peak: no sampling thread competes with the fit
    with warnings.catch_warnings(), config_context(stack_networks=stack), (
            nullcontext() if on_gpu else PeakMemory()) as memory:
        warnings.simplefilter("ignore")  # small parties: label collapse, short training
        start = time.perf_counter()
        clf.fit(X, y, groups=groups, X_unlabeled=X_public)
        seconds = time.perf_counter() - start
    peak = torch.cuda.max_memory_allocated() / 2**20 if on_gpu else memory.mib
    return seconds, peak, clf


def fedkt_round_table(device, split, epochs, seeds, n_parties):
    """FedKT's round with the paper's MLP on digits, both paths, per seed."""
    runs = {path: [] for path in PATHS}
    for seed in seeds:
        data, X, X_public, X_test = split(seed, n_parties)
        for path, stack in PATHS.items():
            clf = FedKTClassifier(paper_net(device, epochs), n_students=2, n_teachers=5,
                                  random_state=seed)
            seconds, _, clf = timed_fit(clf, device, X, data.y_train, data.groups, X_public,
                                        stack)
            runs[path].append(dict(
                teachers=_tier_seconds(clf, "teachers"),
                students=_tier_seconds(clf, "students"),
                final=_tier_seconds(clf, "final model"), round=seconds,
                accuracy=clf.score(X_test, data.y_test)))
    print(f"\nFedKT's round on digits ({n_parties} parties, s = 2, t = 5: "
          f"{10 * n_parties} teachers, {2 * n_parties} students, the final model), the "
          f"paper's MLP as a PyTorch network on {device}, {epochs} epochs, mean ± std "
          f"over {len(seeds)} seeds\n")
    print_table(["path", "teachers (s)", "students (s)", "final model (s)", "round (s)",
                 "accuracy"], [
        [path, *[mean_std([run[key] for run in rows], 1)
                 for key in ("teachers", "students", "final", "round")],
         mean_std([run["accuracy"] for run in rows])]
        for path, rows in runs.items()
    ])
    ratio = {key: np.mean([run[key] for run in runs["one by one"]])
             / np.mean([run[key] for run in runs["stacked"]]) for key in ("teachers", "round")}
    accuracy = {path: [run["accuracy"] for run in rows] for path, rows in runs.items()}
    gap = abs(np.mean(accuracy["stacked"]) - np.mean(accuracy["one by one"]))
    print(f"\nstacked against one by one: the teachers' tier {ratio['teachers']:.1f}x "
          f"faster, the round {ratio['round']:.1f}x faster; accuracy differs by "
          f"{gap:.3f} (std {np.std(accuracy['one by one']):.3f} one by one)")


def _mnist_sized(kind, n_parties, seed=0):
    """Synthetic rows of MNIST's size (784 features; 3 x 32 x 32 for the CNN), 10
    classes, split into `n_parties` Dirichlet(0.5) parties of about
    ``ROWS_PER_TEACHER * 5`` rows, a public set and test rows."""
    n_features = 784 if kind == "MLP" else 3 * 32 * 32
    n_train = n_parties * 5 * ROWS_PER_TEACHER
    X, y = make_classification(n_samples=n_train + PUBLIC_ROWS + TEST_ROWS,
                               n_features=n_features, n_informative=40, n_classes=10,
                               random_state=seed)
    X = X.astype(np.float32)
    groups = dirichlet_partition(y[:n_train], n_parties, beta=0.5, random_state=seed)
    return (X[:n_train], y[:n_train], groups, X[n_train : n_train + PUBLIC_ROWS],
            X[n_train + PUBLIC_ROWS :], y[n_train + PUBLIC_ROWS :])


def throughput_table(device, teacher_counts, epochs, n_jobs, kinds=("MLP", "CNN")):
    """The teachers' tier and the whole round on MNIST-sized inputs, both paths, at
    `n_jobs`, and the test accuracy of each."""
    rows = []
    for kind in kinds:
        for n_teachers in teacher_counts:
            n_parties = max(1, n_teachers // 10)
            X, y, groups, X_public, X_test, y_test = _mnist_sized(kind, n_parties)
            net = paper_net(device, epochs, n_features=784) if kind == "MLP" else (
                paper_cnn(device, epochs))
            # stacked at n_jobs=1 too: more jobs must never be slower
            paths = {"stacked": (True, n_jobs), "one by one": (False, n_jobs)}
            if n_jobs not in (None, 1) and not device.startswith("cuda"):
                paths = {"stacked": (True, n_jobs), "stacked, n_jobs=1": (True, 1),
                         "one by one": (False, n_jobs)}
            for path, (stack, jobs) in paths.items():
                clf = FedKTClassifier(net, n_students=2, n_teachers=5, n_jobs=jobs,
                                      random_state=0)
                seconds, peak, clf = timed_fit(clf, device, X, y, groups, X_public, stack)
                teachers = clf.tier_fits_[0]
                rows.append([kind, teachers["clones"], path, f"{teachers['seconds']:.1f}",
                             f"{teachers['clones'] / teachers['seconds']:.1f}",
                             f"{seconds:.1f}", f"{clf.score(X_test, y_test):.3f}",
                             f"{peak:.0f}", teachers["chunks"] or "-"])
    print(f"\nMNIST-sized inputs on {device} (synthetic; {ROWS_PER_TEACHER * 5} rows a "
          f"party on average, Dirichlet(0.5); s = 2, t = 5; {PUBLIC_ROWS} public rows), the "
          f"paper's networks, {epochs} epochs, n_jobs={n_jobs}: the teachers' tier, "
          "FedKT's whole round and its test accuracy\n")
    print_table(["network", "teachers", "path", "teachers' tier (s)", "teachers per second",
                 "round (s)", "accuracy", "peak memory (MiB)", "chunks"], rows)


def fedavg_table(device, split, seeds, n_parties, n_rounds, local_epochs):
    """FedAvg's rounds with the paper's MLP on digits, both paths."""
    runs = {path: [] for path in PATHS}
    for seed in seeds:
        data, X, _, X_test = split(seed, n_parties)
        probabilities = {}
        for path, stack in PATHS.items():
            clf = FedAvgClassifier(paper_net(device, 1), n_rounds=n_rounds,
                                   local_epochs=local_epochs, random_state=seed)
            seconds, _, clf = timed_fit(clf, device, X, data.y_train, data.groups,
                                        stack=stack)
            probabilities[path] = clf.predict_proba(X_test)
            runs[path].append(dict(seconds=seconds, accuracy=clf.score(X_test, data.y_test),
                                   difference=0.0))
        runs["stacked"][-1]["difference"] = float(np.abs(
            probabilities["stacked"] - probabilities["one by one"]).max())
    print(f"\nFedAvg on digits ({n_parties} parties, {n_rounds} rounds of {local_epochs} "
          f"local epochs), the paper's MLP as a PyTorch network on {device}, mean ± std "
          f"over {len(seeds)} seeds; the largest difference of a test row's probability "
          "between the two paths' models\n")
    print_table(["path", "fit (s)", "accuracy", "largest probability difference"], [
        [path, mean_std([run["seconds"] for run in rows], 1),
         mean_std([run["accuracy"] for run in rows]),
         f"{max(run['difference'] for run in rows):.1e}" if path == "stacked" else "-"]
        for path, rows in runs.items()
    ])
    ratio = (np.mean([run["seconds"] for run in runs["one by one"]])
             / np.mean([run["seconds"] for run in runs["stacked"]]))
    print(f"\nstacked against one by one: {ratio:.1f}x faster")


def _streamed(device, n_parties, teachers_per_partition, epochs, rows_per_teacher):
    """`streaming`'s fit, in a fresh process: its peak memory is then the fit's own,
    not less for the memory earlier fits freed and the allocator kept."""
    n_train = n_parties * teachers_per_partition * rows_per_teacher
    X, y = make_classification(n_samples=n_train + PUBLIC_ROWS, n_features=64,
                               n_informative=20, n_classes=10, random_state=0)
    X = X.astype(np.float32)
    # torch's first-use costs (imports, kernels) before the measured fit
    timed_fit(FedKTClassifier(paper_net(device, 1), n_students=2, n_teachers=2), device,
              X[:200], y[:200], np.arange(200) % 2, X[n_train:])
    clf = FedKTClassifier(paper_net(device, epochs), n_students=2,
                          n_teachers=teachers_per_partition, random_state=0)
    seconds, peak, clf = timed_fit(clf, device, X[:n_train], y[:n_train],
                                   np.arange(n_train) % n_parties, X[n_train:])
    return clf.tier_fits_[0], seconds, peak


def streaming(device, n_parties, teachers_per_partition, epochs, rows_per_teacher=8):
    """A tier of ``n_parties * 2 * teachers_per_partition`` small teachers (rows of 64
    features, `rows_per_teacher` each) streamed through the stack in chunks: how
    many, and the peak memory above what the process held before the fit."""
    from concurrent.futures import ProcessPoolExecutor
    from multiprocessing import get_context

    with ProcessPoolExecutor(1, mp_context=get_context("spawn")) as fresh:
        teachers, seconds, peak = fresh.submit(
            _streamed, device, n_parties, teachers_per_partition, epochs,
            rows_per_teacher).result()
    print(f"\nA tier larger than one chunk on {device}, in a fresh process: {n_parties} "
          f"parties, s = 2, t = {teachers_per_partition} ({rows_per_teacher} rows a "
          f"teacher), {epochs} epochs; on the CPU a chunk holds at most "
          f"{_tier.CPU_CHUNK_BYTES / 2**20:.0f} MiB of training state as "
          f"estimated, and {_tier.MAX_COPIES['cpu']} nets\n")
    print_table(["teachers", "chunks", "teachers' tier (s)", "round (s)",
                 "peak memory (MiB)"],
                [[teachers["clones"], teachers["chunks"], f"{teachers['seconds']:.1f}",
                  f"{seconds:.1f}", f"{peak:.0f}"]])


def run_all(device, split, args):
    """Every table of ``--device``, with the command line's sizes, after a small fit
    that pays torch's first-use costs (imports, kernels) outside every timing."""
    data, X, X_public, _ = split(0, 3)
    timed_fit(FedKTClassifier(paper_net(device, 1), n_students=2, n_teachers=2,
                              random_state=0), device, X, data.y_train, data.groups,
              X_public)
    seeds = range(args.first_seed, args.first_seed + args.device_seeds)
    tables = {
        "fedkt": lambda: fedkt_round_table(device, split, args.epochs, seeds, args.parties),
        "mnist": lambda: throughput_table(device, args.device_teachers, args.device_epochs,
                                          args.n_jobs),
        "fedavg": lambda: fedavg_table(device, split, seeds, args.parties,
                                       args.device_rounds, 10),
        "stream": lambda: streaming(device, args.stream_parties, args.stream_teachers, 5),
        "corpus": lambda: corpus_device_table(device, args.device_teachers,
                                              args.device_epochs, args.n_jobs,
                                              args.one_by_one),
        "convolutions": lambda: convolution_table(device, args.device_teachers[0],
                                                  args.device_epochs),
        "dropout": lambda: dropout_table(device, args.device_seeds),
    }
    for name in args.device_tables:
        tables[name]()

