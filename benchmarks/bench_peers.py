"""What a user would pick instead, on the same parties: flwr-trees' federated trees.

flwr-trees 0.1.0 (scikit-learn estimators on Flower) pools every party's random forest
(``FederatedRandomForestClassifier``, its FedForestBagging) or passes one XGBoost
booster from party to party (``FederatedXGBClassifier``, its FedForestCyclic). Both
split the training rows into parties themselves; here they are given the parties of
``bench_choosing`` instead (its 40/20/40 split and Dirichlet(``--beta``) parties, the
same seeds), so every method learns from the same rows. Beside them, FedKT's default
and the one-shot ensemble of every party's forest, with the same forests (``--trees``
trees, depth 6; flwr-trees' forests are given the same size and depth, its booster its
defaults), and one forest on all the training rows. Prints test accuracy, mean ± std
over seeds, and what each final model holds. Flower's own FedAvg strategy runs
bench_choosing's FedAvg network beside skfedkt's FedAvgClassifier, both for 10 rounds of
one epoch each.

flwr-trees needs numpy >= 2.4.4, scikit-learn >= 1.8 and the ``xgboost`` wheel (which
pulls NVIDIA's NCCL on Linux); with the CPU wheel instead::

    pip install "numpy>=2.4.4" "scikit-learn>=1.8" xgboost-cpu
    pip install --no-deps flwr-trees==0.1.0
    python benchmarks/bench_peers.py

Without flwr-trees, ``--methods`` runs skfedkt's methods alone.

Produces: doc/user_guide/choosing.rst, "What a user would pick instead".
"""

import logging
import warnings
from functools import partial
from importlib.util import find_spec
from unittest import mock

import numpy as np
from _common import forest, mean_std, parser, print_table, runs_by_dataset_and_method
from bench_choosing import BUNDLED, load
from sklearn.neural_network import MLPClassifier
from sklearn.preprocessing import StandardScaler
from sklearn.utils import Bunch

from skfedkt import FedAvgClassifier, FedKTClassifier, OneShotEnsembleClassifier

FEDAVG_ROUNDS = 10


def _flwr_trees(estimator):
    """A flwr-trees estimator fitted on the given parties rather than its own split."""
    def fit(data, seed, trees):
        parties = [(data.X_train[data.groups == g], data.y_train[data.groups == g])
                   for g in np.unique(data.groups)]
        model = estimator(len(parties), seed, trees)
        # its fit splits the rows by its module's simulate_clients: the parties instead
        with mock.patch(f"{type(model).__module__}.simulate_clients",
                        lambda *args, **kwargs: parties):
            return model.fit(data.X_train, data.y_train)
    return fit


def _skfedkt(estimator):
    def fit(data, seed, trees):
        return estimator(seed, trees).fit(data.X_train, data.y_train, groups=data.groups,
                                          X_unlabeled=data.X_public)
    return fit


def _mlp(seed):
    """bench_choosing's FedAvg network."""
    return MLPClassifier(hidden_layer_sizes=(100, 100), learning_rate_init=0.001,
                         batch_size=32, random_state=seed)


def _fedavg_classifier(data, seed, trees):
    return FedAvgClassifier(_mlp(seed), n_rounds=FEDAVG_ROUNDS, random_state=seed).fit(
        data.X_train, data.y_train, groups=data.groups, X_unlabeled=data.X_public)


def _flower_fedavg(data, seed, trees):
    """Flower's own FedAvg strategy as its users write it: a ClientApp per party that
    trains the network it receives one epoch (``partial_fit``) on its rows, over
    skfedkt's in-process grid; the network starts from Glorot-uniform weights, as
    scikit-learn draws them."""
    from flwr.app import ArrayRecord, Message, MetricRecord, RecordDict
    from flwr.clientapp import ClientApp
    from flwr.serverapp.strategy import FedAvg

    from skfedkt.algorithm import flower_task_identity, in_process_grid

    classes, parties = np.unique(data.y_train), np.unique(data.groups)
    # scikit-learn's network has one output unit for two classes
    sizes = [data.X_train.shape[1], *_mlp(seed).hidden_layer_sizes,
             1 if len(classes) == 2 else len(classes)]
    rng = np.random.default_rng(seed)
    bounds = [np.sqrt(6 / (n_in + n_out)) for n_in, n_out in zip(sizes, sizes[1:])]
    weights = ([rng.uniform(-b, b, (n_in, n_out)) for b, n_in, n_out in
                zip(bounds, sizes, sizes[1:])]
               + [rng.uniform(-b, b, n_out) for b, n_out in zip(bounds, sizes[1:])])

    def network(arrays):
        """The network with `arrays`' weights, ready for partial_fit."""
        model = _mlp(seed).partial_fit(data.X_train[:1], data.y_train[:1], classes=classes)
        values = arrays.to_numpy_ndarrays()
        model.coefs_, model.intercepts_ = values[:len(sizes) - 1], values[len(sizes) - 1:]
        del model._optimizer  # Adam starts afresh every round, as in a stateless ClientApp
        return model

    client = ClientApp()

    @client.train()
    def train(message, context):
        rows = data.groups == parties[context.node_config["partition-id"]]
        model = network(message.content["arrays"]).partial_fit(data.X_train[rows],
                                                               data.y_train[rows])
        return Message(RecordDict({
            "arrays": ArrayRecord([*model.coefs_, *model.intercepts_]),
            "metrics": MetricRecord({"num-examples": int(rows.sum())})}), reply_to=message)

    strategy = FedAvg(fraction_evaluate=0.0, min_available_nodes=len(parties))
    logging.getLogger("flwr").setLevel(logging.ERROR)  # not its log of every round
    with flower_task_identity(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # one partial_fit is one epoch: not converged
        result = strategy.start(in_process_grid(client, len(parties)),
                                ArrayRecord(weights), num_rounds=FEDAVG_ROUNDS)
        return network(result.arrays)


def _pooled_forest(n_parties, seed, trees):
    from flwr_trees import FederatedRandomForestClassifier

    return FederatedRandomForestClassifier(n_estimators=trees, max_depth=6,
                                           n_clients=n_parties, random_state=seed)


def _cyclic_xgboost(n_parties, seed, trees):
    from flwr_trees import FederatedXGBClassifier

    return FederatedXGBClassifier(n_clients=n_parties, random_state=seed)


# method: (fit(data, seed, trees) -> fitted model, what its final model holds)
METHODS = {
    "FedKT (default)": (_skfedkt(lambda seed, trees: FedKTClassifier(
        forest(trees), random_state=seed)), "one model"),
    "one-shot ensemble (all parties)": (_skfedkt(lambda seed, trees: OneShotEnsembleClassifier(
        forest(trees), selection="all", random_state=seed)), "every party's forest"),
    "flwr-trees: pooled forests": (_flwr_trees(_pooled_forest), "every party's trees"),
    "flwr-trees: cyclic XGBoost": (_flwr_trees(_cyclic_xgboost),
                                   "one booster every party added to"),
    "FedAvgClassifier (MLP, 10 rounds)": (_fedavg_classifier, "one network"),
    "Flower's FedAvg strategy (MLP, 10 rounds)": (_flower_fedavg, "one network"),
    "centralized (not federated)": (
        lambda data, seed, trees: forest(trees).set_params(random_state=seed).fit(
            data.X_train, data.y_train), "one forest on all rows"),
}
NEEDS_FLWR_TREES = {method for method in METHODS if method.startswith("flwr-trees")}


def run(dataset, beta, seed, method, trees):
    data = load(dataset, beta, seed, None)
    if "MLP" in method:  # the network's inputs: one scale for every party, as in choosing
        scaler = StandardScaler().fit(data.X_public)
        data = Bunch(**{**data, **{key: scaler.transform(data[key])
                                   for key in ("X_train", "X_public", "X_test")}})
    model = METHODS[method][0](data, seed, trees)
    return model.score(data.X_test, data.y_test)


def main(argv=None):
    command = parser(__doc__, seeds=3, n_jobs=2, trees=50)
    command.add_argument("--datasets", nargs="+", choices=list(BUNDLED), default=list(BUNDLED))
    command.add_argument("--beta", type=float, default=0.5)
    command.add_argument("--methods", nargs="+", choices=list(METHODS), default=list(METHODS))
    args = command.parse_args(argv)
    if NEEDS_FLWR_TREES & set(args.methods) and find_spec("flwr_trees") is None:
        command.error("flwr-trees is not installed (see this script's help for how), or "
                      "pass --methods without " + ", ".join(sorted(NEEDS_FLWR_TREES)))
    table = runs_by_dataset_and_method(
        partial(run, beta=args.beta, trees=args.trees), args.datasets, args.seeds,
        args.methods, args.n_jobs, "fits (dataset, seed, method)")
    print(f"Dirichlet(beta={args.beta:g}) parties, the splits of bench_choosing; test "
          f"accuracy, mean ± std over {args.seeds} seeds\n")
    print_table(["dataset", "method", "accuracy", "final model"],
                [[dataset, method, mean_std(values), METHODS[method][1]]
                 for (dataset, method), values in table.items()])


if __name__ == "__main__":
    main()
