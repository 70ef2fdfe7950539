"""Every skfedkt algorithm between SuperNodes that each read their own CSV; the run
config's ``algorithm`` picks one, and the ServerApp saves its model."""

import numpy as np
from sklearn.neural_network import MLPClassifier
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import FunctionTransformer

from skfedkt import (
    FedAvgClassifier,
    FedCTClassifier,
    FedKTClassifier,
    OneShotEnsembleClassifier,
    save_model,
)
from skfedkt.datasets import load_local_file
from skfedkt.flower import client_app, server_app

ESTIMATORS = {
    "fedkt": FedKTClassifier(random_state=0),
    "oneshot": OneShotEnsembleClassifier(random_state=0),
    "fedct": FedCTClassifier(n_rounds=5, random_state=0),
    # a stateless step (the same at every party) brings the counts to a network's scale
    "fedavg": FedAvgClassifier(make_pipeline(FunctionTransformer(np.log1p),
                                             MLPClassifier(hidden_layer_sizes=(16,))),
                               n_rounds=5, random_state=0),
}
# three SuperNodes are the consortium; a run goes on without one that drops (named in
# the model's left_out_parties_), never with fewer than two; a ClientApp is a new
# Python process per message, whose reply on a busy 2-core machine can take a minute
N_PARTIES, MIN_PARTIES, TIMEOUT = 3, 2, 120.0


def estimator(context):
    return ESTIMATORS[context.run_config["algorithm"]]


def node_public(context):
    return load_local_file(context.node_config["public-path"], labelled=False)[0]


def run_public(context):
    return load_local_file(context.run_config["public-path"], labelled=False)[0]


def party_data(context):
    X, y = load_local_file(context.node_config["data-path"])
    return X, y, context.node_config["party"]


def save(model, context):
    save_model(model, context.run_config["model-path"])


client = client_app(estimator, party_data, node_public, classes=[0, 1])
server = server_app(estimator, run_public, n_parties=N_PARTIES, on_fit=save,
                    min_parties=MIN_PARTIES, timeout=TIMEOUT)
