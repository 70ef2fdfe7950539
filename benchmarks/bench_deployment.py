"""Upload size per party and time per step of every algorithm, deployed through files.

Each party's step runs on its own rows and writes its upload file; the server's step
reads and checks the files. Prints, per dataset and algorithm, the mean ± std upload
size per party, the seconds of each step and the memory the final server step
allocates per party (its peak, traced by tracemalloc, over the parties), and checks
the deployed model against ``fit``. Times include reading and writing the files, not
importing skops. A second table gives the caps on every file that each agreement
implies (``agreed_upload_limits``, a reference party of the largest party's rows,
margin 4) beside the largest honest upload.

    python benchmarks/bench_deployment.py [--datasets digits breast_cancer] [--parties 10]

Produces: doc/performance/deployment.rst, "Deployment through files".
"""

import tempfile
import time
import tracemalloc
import warnings
from pathlib import Path

import numpy as np
import skops.io  # noqa: F401  (imported once, before any step is timed)
from _common import bar_figure, cell_spread, forest, parser, print_table, progress
from sklearn.base import clone

from skfedkt import (
    FedCTClassifier,
    FedKTClassifier,
    OneShotEnsembleClassifier,
    UploadError,
    read_upload,
)
from skfedkt.datasets import load_federated

ALGORITHMS = {
    "fedkt": lambda n_trees: FedKTClassifier(forest(n_trees), random_state=0),
    "oneshot (cv)": lambda n_trees: OneShotEnsembleClassifier(
        forest(n_trees), selection="cv", n_selected=5, random_state=0),
    "fedct": lambda n_trees: FedCTClassifier(forest(n_trees), random_state=0),
}


def deploy(clf, data, folder):
    """Run the party and server steps through files.

    Returns the rounds, the fitted server, per phase ("labels" for FedCT's rounds,
    "model" for what ends training) the upload sizes, party seconds and server seconds,
    and the peak memory the final server step allocates (once more, untimed, traced).
    """
    parties = np.unique(data.groups)
    rows = {p: data.groups == p for p in parties}
    classes = np.unique(data.y_train)
    phases = {}
    server, message, round_ = clone(clf), None, 0
    fedct = isinstance(clf, FedCTClassifier)
    while True:
        final = not fedct or (message is not None and message.manifest["done"])
        sizes, party_seconds, server_seconds = phases.setdefault(
            "model" if final else "labels", ([], [], [])
        )
        paths = []
        for p in parties:
            start = time.perf_counter()
            options = dict(party=int(p), classes=classes, X_unlabeled=data.X_public)
            if fedct:
                options["message"] = message
            upload = clf.fit_party(data.X_train[rows[p]], data.y_train[rows[p]], **options)
            path = folder / f"{round_}-{p}.skfedkt"
            sizes.append(upload.save(path))
            party_seconds.append(time.perf_counter() - start)
            paths.append(path)
        start = time.perf_counter()
        if final:
            options = {"message": message} if fedct else {}
            server.fit_server(paths, data.X_public, **options)
            server_seconds.append(time.perf_counter() - start)
            tracemalloc.start()
            clone(clf).fit_server(paths, data.X_public, **options)
            peak = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
            return max(round_, 1), server, phases, peak
        message = server.server_round(paths, data.X_public, message=message)
        server_seconds.append(time.perf_counter() - start)
        round_ += 1


def _reads_within(path, limits):
    """Whether an honest upload file is read within `limits`."""
    try:
        read_upload(path, limits=limits)
    except UploadError:
        return False
    return True


WHAT = {"fedkt": "students", "oneshot (cv)": "local model and score",
        "fedct": "final model"}


def main(argv=None):
    command = parser(__doc__, trees=100)
    command.add_argument("--datasets", nargs="+", default=["digits", "breast_cancer"])
    command.add_argument("--parties", type=int, default=10)
    args = command.parse_args(argv)
    print_table(["dataset", "algorithm", "rounds", "upload", "per party (kB)",
                 "party step (s)", "server step (s)", "server memory per party (MiB)",
                 "same model as fit"], [])
    datasets = {name: load_federated(name, n_parties=args.parties, beta=0.5, random_state=0)
                for name in args.datasets}
    runs = progress([(name, label, make) for name in args.datasets
                     for label, make in ALGORITHMS.items()],
                    "deployments through files (dataset, algorithm)")
    caps = []
    for name, label, make in runs:
        data = datasets[name]
        clf = make(args.trees)
        largest = int(np.bincount(np.unique(data.groups, return_inverse=True)[1]).max())
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            limits = clf.agreed_upload_limits(data.X_public, np.unique(data.y_train),
                                              party_rows=largest)
        with tempfile.TemporaryDirectory() as folder, warnings.catch_warnings():
            warnings.simplefilter("ignore")
            rounds, server, phases, peak = deploy(clf, data, Path(folder))
            files = sorted(Path(folder).glob("*.skfedkt"))
            passed = sum(_reads_within(path, limits) for path in files)
            fitted = clone(clf).fit(data.X_train, data.y_train, groups=data.groups,
                                    X_unlabeled=data.X_public)
        same = np.array_equal(server.predict_proba(data.X_test),
                              fitted.predict_proba(data.X_test))
        honest = max(max(sizes) for sizes, _, _ in phases.values())
        caps.append([name, label, largest, f"{honest / 1000:.1f}",
                     f"{limits.max_file_bytes / 1000:.1f}",
                     f"{limits.max_inflated_bytes / 1000:.1f}",
                     f"{limits.max_schema_bytes / 1000:.1f}", limits.max_members,
                     f"{passed}/{len(files)}"])
        for phase, (sizes, party_s, server_s) in phases.items():
            what = {"labels": "labels, each round", "model": WHAT[label]}[phase]
            memory = (f"{peak / 2**20 / len(sizes):.1f}" if phase == "model" else "")
            sizes = np.array(sizes) / 1000
            print_table(None, [[
                name, label, rounds, what,
                f"{sizes.mean():.1f} ± {sizes.std():.1f} (max {sizes.max():.1f})",
                f"{np.mean(party_s):.2f} ± {np.std(party_s):.2f}",
                f"{np.mean(server_s):.2f} ± {np.std(server_s):.2f}", memory, same]])

    print()
    print_table(["dataset", "algorithm", "largest party (rows)",
                 "largest honest upload (kB)", "max_file_bytes (kB)",
                 "max_inflated_bytes (kB)", "max_schema_bytes (kB)", "max_members",
                 "honest files read within the caps"], caps)


def figure(results):
    """What a party sends, per upload, every algorithm and dataset, from the stored
    table of `main` (log scale: FedCT's labels are a thousand times smaller than
    models)."""
    rows = results["tables"][0]["rows"]
    sizes, spreads = zip(*(cell_spread(row[4]) for row in rows))
    return bar_figure([f"{row[0]}: {row[1]}, {row[3]}" for row in rows], sizes,
                      "kB per party and upload", errors=spreads, log=True)


if __name__ == "__main__":
    main()
