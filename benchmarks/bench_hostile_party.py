"""What one party that lies about its size can do to FedKT's server, with and without
the server's bound on a party's weight (at most ``MAX_PARTY_WEIGHT`` times the median
party, and at most all the other parties together).

Every party runs its honest party step; one party (the largest holder of the minority
class, or of class 0) then rewrites its upload before sending it, consistently, so
that every check passes: its class counts and rows multiplied by ``--factor`` ("inflate"),
or all its claimed rows put in its majority class ("one class"), in its manifest and in
its sums (the counts, and the pooling's terms computed from them). The server's step runs
on the uploads as files. Prints test accuracy and the final model's positive rate, mean ±
std over seeds, for the honest uploads, the lie with the bound, and the lie without it.

    python benchmarks/bench_hostile_party.py [--seeds 3] [--factor 1000] [--datasets digits]

Produces: doc/performance/deployment.rst, "A party that lies within the checks".
"""

import time
import warnings

import numpy as np
from _common import forest, mean_std, parser, print_table, progress
from bench_label_skew import BETAS, PARTIES, PARTIES_AT, load

import skfedkt._fedkt._sums as fedkt_sums
from skfedkt import FedKTClassifier, PartyUpload
from skfedkt._engine._voting import bounded_party_counts, capped_rows, prior_corrected_terms
from skfedkt._fedkt._plan import FedKTPlan


def inflate(manifest, factor):
    manifest["class_counts"] = [int(c * factor) for c in manifest["class_counts"]]
    manifest["n_rows"] = sum(manifest["class_counts"])


def one_class(manifest, factor):
    counts = np.zeros(len(manifest["class_counts"]), dtype=int)
    counts[int(np.argmax(manifest["class_counts"]))] = manifest["n_rows"] * factor
    manifest["class_counts"] = counts.tolist()
    manifest["n_rows"] = int(counts.sum())


LIES = {"inflate": inflate, "one class": one_class}
CONSORTIA = {"imbalanced": 50, "breast_cancer": 5, "digits": 10}


def run(dataset, n_parties, beta, seed, lie, factor, bounded, n_trees=50):
    data = load(dataset, n_parties, beta, seed)
    clf = FedKTClassifier(forest(n_trees), random_state=seed)
    classes = np.unique(data.y_train)
    uploads = [
        clf.fit_party(data.X_train[data.groups == p], data.y_train[data.groups == p],
                      party=int(p), classes=classes, X_unlabeled=data.X_public)
        for p in np.unique(data.groups)
    ]
    if lie is not None:
        # the liar: the party holding the most rows of the rarest class
        rare = np.argmin(np.bincount(data.y_train))
        liar = int(np.argmax([u.manifest["class_counts"][rare] for u in uploads]))
        manifest, sums = uploads[liar].manifest, uploads[liar].payload["sums"]
        LIES[lie](manifest, factor)
        # consistently: the teachers the claimed rows give, and the sums of those rows
        manifest["n_teachers"] = FedKTPlan.of(clf).teachers_for(manifest["n_rows"])
        sums.update(prior_corrected_terms(sums["proba"], manifest["class_counts"]))
    files = [PartyUpload(u.manifest, u.payload).to_bytes() for u in uploads]
    fedkt_sums.capped_rows = capped_rows if bounded else uncapped_rows
    try:
        server = clf.fit_server(files, data.X_public)
    finally:
        fedkt_sums.capped_rows = capped_rows
    predictions = server.predict(data.X_test)
    return np.mean(predictions == data.y_test), np.mean(predictions == classes[-1])


def uncapped_rows(parties, rows, claimed):
    return np.asarray(rows, dtype=float)


def honest_partitions_bound(n_seeds):
    """In how many of bench_label_skew's honest partitions the bound caps a party."""
    capped = []
    for dataset, n_parties in PARTIES.items():
        for beta in BETAS:
            for seed in range(n_seeds):
                data = load(dataset, PARTIES_AT.get((dataset, beta), n_parties), beta, seed)
                counts = [np.bincount(data.y_train[data.groups == p],
                                      minlength=data.y_train.max() + 1)
                          for p in np.unique(data.groups)]
                if bounded_party_counts(counts)[1].size:
                    capped.append(f"{dataset} beta={beta} seed={seed}")
    total = len(PARTIES) * len(BETAS) * n_seeds
    return (f"honest partitions of bench_label_skew.py where the bound caps a party: "
            f"{len(capped)} of {total} ({', '.join(capped)})")


def main(argv=None):
    command = parser(__doc__, seeds=3, trees=50)
    command.add_argument("--factor", type=float, default=1000)
    command.add_argument("--seeds-skew", type=int, default=5,
                         help="seeds of bench_label_skew's partitions to check the bound on")
    command.add_argument("--datasets", nargs="+", choices=CONSORTIA, default=list(CONSORTIA))
    args = command.parse_args(argv)
    start = time.perf_counter()
    settings = [("honest", None, True), ("inflate, bounded", "inflate", True),
                ("inflate, unbounded", "inflate", False),
                ("one class, bounded", "one class", True),
                ("one class, unbounded", "one class", False)]
    rows = []
    for dataset, (name, lie, bounded) in progress(
            [(dataset, setting) for dataset in args.datasets for setting in settings],
            "consortia (dataset, uploads)"):
        n_parties = CONSORTIA[dataset]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            results = [run(dataset, n_parties, 0.5, seed, lie, args.factor, bounded,
                           args.trees) for seed in range(args.seeds)]
        rows.append([dataset, n_parties, name, mean_std([r[0] for r in results]),
                     f"{np.mean([r[1] for r in results]):.3f}"])
    print(f"FedKT's default, random forests ({args.trees} trees, depth 6), Dirichlet(0.5) "
          "parties; "
          f"the lie multiplies the liar's claimed rows by {args.factor:g}; test accuracy "
          f"mean ± std over {args.seeds} seeds, and the share of the last class predicted\n")
    print_table(["dataset", "parties", "uploads", "accuracy", "last class predicted"], rows)
    print(f"\n{honest_partitions_bound(args.seeds_skew)}")
    print(f"\ntotal {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
