"""FedKT between SuperNodes that each read their own CSV; the ServerApp saves the model."""

from skfedkt import FedKTClassifier, save_model
from skfedkt.datasets import load_local_file
from skfedkt.flower import client_app, server_app

ESTIMATOR = FedKTClassifier(random_state=0)


def node_public(context):
    return load_local_file(context.node_config["public-path"], labelled=False)[0]


def run_public(context):
    return load_local_file(context.run_config["public-path"], labelled=False)[0]


def party_data(context):
    X, y = load_local_file(context.node_config["data-path"])
    return X, y, context.node_config["party"]


def save(model, context):
    save_model(model, context.run_config["model-path"])


client = client_app(ESTIMATOR, party_data, node_public, classes=[0, 1])
server = server_app(ESTIMATOR, run_public, n_parties=2, on_fit=save)
