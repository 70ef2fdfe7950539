"""What ``bench_networks.py --corpus`` and its ``corpus`` and ``convolutions`` device
tables measure: the twelve nets of ``_net_corpus.py``, as people write them.

- on digits (5 Dirichlet(0.5) parties, whose teachers hold rows enough for skorch's
  default validation split; a binary net learns even against odd digits):
  the path each net's tiers take, FedKT's round (s = 2, t = 5, 20 epochs) stacked and
  one by one (``stack_networks=False``) at the same ``n_jobs``, the test accuracy of both, and
  the largest difference of a stacked net's weights from its separate fit's (float64
  builds, a float32 one for the binary net, whose float targets torch reduces in
  float32);
- on MNIST-sized rows (synthetic, 784 features, 10 Dirichlet(0.5) parties of 375 rows
  a hundred teachers), the round of each MLP-type net at 100 and 500 teachers;
- convolutions: the paper's CNN and skorch's tutorial CNN, a tier of 100 teachers,
  one by one against stacked as unfolded patches times kernels and through vmap (a
  grouped convolution).

Printing of the nets (skorch's ``verbose=1``) is silenced; every other setting is as
written.
"""

import time
import warnings

import numpy as np
import torch
from _common import print_table
from _net_corpus import CORPUS
from _torch_nets import paper_cnn
from sklearn.datasets import load_digits, make_classification
from sklearn.model_selection import train_test_split

from skfedkt import FedKTClassifier, config_context
from skfedkt._engine._stacking import _tier
from skfedkt._engine._fitting import Task, TierJob, fit_clones, recording_tiers
from skfedkt._engine._seeds import seeded_clone
from skfedkt.datasets import dirichlet_partition

PATHS = {"stacked": True, "one by one": False}


def built(net, n_features, n_classes, device, epochs=None, dtype=torch.float32):
    """`net`'s estimator on `device`, silent, with `epochs` epochs if given."""
    estimator = net.build(n_features, n_classes, dtype)
    name = estimator.steps[-1][0]
    settings = {f"{name}__verbose": 0, f"{name}__device": device}
    if epochs is not None:
        settings[f"{name}__max_epochs"] = epochs
    return estimator.set_params(**settings)


def _digits(net, seed, n_parties=5):
    """digits scaled to [0, 1] (even against odd for a binary net), `n_parties`
    Dirichlet(0.5) parties, a public set and test rows (75/12.5/12.5)."""
    X, y = load_digits(return_X_y=True)
    X = X / 16
    if net.kind == "binary":
        y = y % 2
    X_train, X_rest, y_train, y_rest = train_test_split(X, y, train_size=0.75,
                                                        random_state=seed, stratify=y)
    X_public, X_test, _, y_test = train_test_split(X_rest, y_rest, train_size=0.5,
                                                   random_state=seed, stratify=y_rest)
    groups = dirichlet_partition(y_train, n_parties, beta=0.5, random_state=seed)
    return X_train, y_train, groups, X_public, X_test, y_test


def _round(estimator, data, stack, n_jobs, seed):
    X, y, groups, X_public, X_test, y_test = data
    clf = FedKTClassifier(estimator, n_students=2, n_teachers=5, n_jobs=n_jobs,
                          random_state=seed)
    with warnings.catch_warnings(), config_context(stack_networks=stack):
        warnings.simplefilter("ignore")  # small parties: few rows of a class, collapse
        start = time.perf_counter()
        clf.fit(X, y, groups=groups, X_unlabeled=X_public)
        seconds = time.perf_counter() - start
    return seconds, clf.score(X_test, y_test), clf


def weight_difference(net, n_tasks=4, epochs=4):
    """The largest difference of a stacked net's weights from its separate fit's, on
    `n_tasks` tasks of digits rows (float64 builds; float32 for a binary net)."""
    X, y = load_digits(return_X_y=True)
    X = X / 16
    if net.kind == "binary":
        y = y % 2
    n_classes = len(np.unique(y))
    dtype = torch.float32 if net.kind == "binary" else torch.float64
    estimator = built(net, 64, n_classes, "cpu", epochs, dtype)
    tasks = [Task(estimator, y[rows], rows)
             for rows in np.array_split(np.arange(60 * n_tasks), n_tasks)]
    convolutions = _tier.CPU_UNHELPED_MODULES
    _tier.CPU_UNHELPED_MODULES = ()  # the check stacks a CNN on the CPU too
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fits = fit_clones(tasks, TierJob(X, n_classes), np.arange(n_tasks))
            largest = 0.0
            for task, seed, model in zip(tasks, range(n_tasks), fits.models):
                alone = seeded_clone(estimator, seed).fit(
                    X[task.rows], task.y.astype(np.float32 if n_classes == 2 else np.int64))
                for mine, theirs in zip(model.estimator[-1].module_.state_dict().values(),
                                        alone[-1].module_.state_dict().values()):
                    largest = max(largest, float((mine.double() - theirs.double()).abs().max()))
    finally:
        _tier.CPU_UNHELPED_MODULES = convolutions
    return largest


def corpus_table(device, n_jobs, epochs, seed=0):
    """Each net of the corpus on digits: its path, FedKT's round both ways, the
    stacked nets' distance from their separate fits."""
    print(f"\nThe corpus of nets as people write them (benchmarks/_net_corpus.py) on "
          f"digits, 5 Dirichlet(0.5) parties, FedKT's round (s = 2, t = 5, {epochs} "
          f"epochs) on {device} at n_jobs={n_jobs}, stacked and with "
          f"stack_networks=False, seed {seed}; the largest difference of a stacked "
          "net's weights from its separate fit (4 nets on digits rows)\n")
    print_table(["net", "path", "round stacked (s)", "round one by one (s)", "faster",
                 "accuracy stacked", "accuracy one by one", "weights' difference"], [])
    for net in CORPUS:
        data = _digits(net, seed)
        n_classes = len(np.unique(data[1]))
        runs = {}
        try:
            for path, stack in PATHS.items():
                estimator = built(net, 64, n_classes, device, epochs)
                runs[path] = _round(estimator, data, stack, n_jobs, seed)
        except ValueError as exc:  # the net's own validation split, refused before any fit
            print_table(None, [[net.name, f"refused: {str(exc)[:120]}..."] + ["-"] * 6])
            continue
        # a tier whose clones all hold one class trains no network (constant models)
        alone = [t["reason"] for t in runs["stacked"][2].tier_fits_
                 if t["path"] != "stacked" and not t["reason"].startswith("every clone")]
        path = f"one by one ({alone[0]})" if alone else "stacked"
        ratio = runs["one by one"][0] / runs["stacked"][0]
        print_table(None, [[net.name, path, f"{runs['stacked'][0]:.1f}",
                            f"{runs['one by one'][0]:.1f}", f"{ratio:.1f}",
                            f"{runs['stacked'][1]:.3f}", f"{runs['one by one'][1]:.3f}",
                            f"{weight_difference(net):.0e}"]])


def _mnist_sized(n_parties, n_classes=10, seed=0):
    """Synthetic rows of MNIST's size, `n_parties` Dirichlet(0.5) parties of 375 rows
    on average, 625 public rows and 1,000 test rows."""
    n_train = 375 * n_parties
    X, y = make_classification(n_samples=n_train + 1625, n_features=784, n_informative=40,
                               n_classes=n_classes, random_state=seed)
    X = X.astype(np.float32)
    groups = dirichlet_partition(y[:n_train], n_parties, beta=0.5, random_state=seed)
    return (X[:n_train], y[:n_train], groups, X[n_train : n_train + 625],
            X[n_train + 625 :], y[n_train + 625 :])


def corpus_device_table(device, teacher_counts, epochs, n_jobs, one_by_one):
    """Each MLP-type net of the corpus, FedKT's round on MNIST-sized rows, stacked
    (and one by one with `one_by_one`), at each count of teachers; each row printed as
    it is measured."""
    print(f"\nThe corpus's MLP-type nets on MNIST-sized rows (synthetic, 784 features, "
          f"375 rows a party, 10 teachers a party), FedKT's round (s = 2, t = 5, {epochs} "
          f"epochs) on {device}\n")
    print_table(["net", "teachers", "path", "teachers' tier (s)", "round (s)", "accuracy"],
                [])
    for n_teachers in teacher_counts:
        for net in (net for net in CORPUS if net.kind != "cnn"):
            n_classes = 2 if net.kind == "binary" else 10
            data = _mnist_sized(n_teachers // 10, n_classes)
            paths = PATHS if one_by_one else {"stacked": True}
            for path, stack in paths.items():
                try:
                    seconds, accuracy, clf = _round(
                        built(net, 784, n_classes, device, epochs), data, stack, n_jobs, 0)
                except ValueError as exc:  # the net's own split, refused before any fit
                    print_table(None, [[net.name, n_teachers, f"refused: {str(exc)[:90]}...",
                                        "-", "-", "-"]])
                    continue
                teachers = clf.tier_fits_[0]
                print_table(None, [[net.name, n_teachers, path, f"{teachers['seconds']:.1f}",
                                    f"{seconds:.1f}", f"{accuracy:.3f}"]])


def convolution_table(device, n_teachers, epochs):
    """The paper's CNN and the tutorial's CNN, a tier of `n_teachers` teachers: one by
    one against the two stacked convolutions."""
    kinds = {"the paper's CNN (3 x 32 x 32)": (3 * 32 * 32, lambda: paper_cnn(device, epochs)),
             "skorch's tutorial CNN (1 x 28 x 28)": (784, lambda: built(
                 CORPUS[2], 784, 10, device, epochs).set_params(
                 neuralnetclassifier__train_split=None))}
    variants = {"one by one": None, "stacked, unfolded": True,
                "stacked, vmap (grouped)": False}
    rows = []
    kind = torch.device(device).type
    saved = _tier.CPU_UNHELPED_MODULES, dict(_tier.UNFOLD_CONVOLUTIONS)
    try:
        _tier.CPU_UNHELPED_MODULES = ()
        for name, (n_features, make) in kinds.items():
            n_parties = max(1, n_teachers // 10)
            X, y = make_classification(n_samples=375 * n_parties + 625,
                                       n_features=n_features, n_informative=40,
                                       n_classes=10, random_state=0)
            X = X.astype(np.float32)
            groups = dirichlet_partition(y[: 375 * n_parties], n_parties, beta=0.5,
                                         random_state=0)
            rng = np.random.RandomState(0)
            estimator = make()
            tasks = [Task(estimator, y[part], part)
                     for party in range(n_parties)
                     for rows_ in [rng.permutation(np.flatnonzero(groups == party))]
                     for _ in range(2) for part in np.array_split(rows_, 5)]
            for variant, unfold in variants.items():
                if unfold is not None:
                    _tier.UNFOLD_CONVOLUTIONS[kind] = unfold
                with recording_tiers() as tiers, warnings.catch_warnings(), config_context(
                        stack_networks=unfold is not None):
                    warnings.simplefilter("ignore")
                    start = time.perf_counter()
                    fit_clones(tasks, TierJob(X[: 375 * n_parties], 10,
                                              X_predict=X[375 * n_parties :],
                                              keep_models=False),
                               np.arange(len(tasks)), n_jobs=2)
                    seconds = time.perf_counter() - start
                rows.append([name, len(tasks), variant, f"{seconds:.1f}", tiers[0]["path"]])
    finally:
        _tier.CPU_UNHELPED_MODULES, unfold_by_device = saved
        _tier.UNFOLD_CONVOLUTIONS.update(unfold_by_device)
    print(f"\nConvolutions on {device}: a tier of teachers ({epochs} epochs, n_jobs=2) of "
          "the paper's CNN and of skorch's tutorial CNN, one by one and stacked two "
          "ways\n")
    print_table(["network", "teachers", "how", "teachers' tier (s)", "path"], rows)


def dropout_table(device, n_seeds=10, n_clones=5, epochs=30):
    """Nets with dropout, stacked and one by one on `device`, over `n_seeds` seeds:
    their clones' mean test accuracy on digits, and Welch's test of the two paths'
    means (on a GPU the stack draws each net's noise from a generator of its own, not
    torch's global one: the same distribution, not the same bits)."""
    from scipy.stats import ttest_ind

    rows = []
    for net in (CORPUS[1], CORPUS[-1]):
        X, y = load_digits(return_X_y=True)
        X, y = X / 16, (y % 2 if net.kind == "binary" else y)
        n_classes = len(np.unique(y))
        X_train, X_test, y_train, y_test = train_test_split(X, y, train_size=0.5,
                                                            random_state=0, stratify=y)
        estimator = built(net, 64, n_classes, device, epochs).set_params(
            **{f"{net.build(64, 10, torch.float32).steps[-1][0]}__train_split": None})
        accuracies = {path: [] for path in PATHS}
        for seed in range(n_seeds):
            tasks = [Task(estimator, y_train[rows_], rows_) for rows_ in np.array_split(
                np.random.RandomState(seed).permutation(len(y_train)), n_clones)]
            for path, stack in PATHS.items():
                with warnings.catch_warnings(), config_context(stack_networks=stack):
                    warnings.simplefilter("ignore")
                    fits = fit_clones(tasks, TierJob(X_train, n_classes),
                                      np.arange(n_clones) + 100 * seed)
                accuracies[path].append(np.mean([np.mean(model.predict(X_test) == y_test)
                                                 for model in fits.models]))
        stacked, alone = accuracies["stacked"], accuracies["one by one"]
        # Welch's test needs two seeds a path (a tiny run has one)
        pvalue = (f"{ttest_ind(stacked, alone, equal_var=False).pvalue:.2f}" if n_seeds > 1
                  else "-")
        rows.append([net.name, *[f"{np.mean(a):.3f} ± {np.std(a):.3f}"
                                 for a in accuracies.values()], pvalue])
    print(f"\nDropout on {device}: {n_clones} nets of digits rows each (even against odd "
          f"for the binary net; train_split=None, {epochs} epochs), their mean test "
          f"accuracy over {n_seeds} seeds, stacked and one by one; Welch's test of the two "
          "means\n")
    print_table(["net", "stacked", "one by one", "p-value"], rows)
