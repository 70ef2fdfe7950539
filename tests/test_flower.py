"""The Flower apps, run with Flower's simulation engine: the same models as fit."""

import os
import warnings

import numpy as np
import pytest
from numpy.testing import assert_array_equal
from sklearn.base import clone
from sklearn.datasets import load_breast_cancer
from sklearn.ensemble import RandomForestClassifier
from sklearn.tree import DecisionTreeClassifier

from skfedkt import FedCTClassifier, FedKTClassifier

pytest.importorskip("flwr.simulation")
pytest.importorskip("ray")
os.environ.setdefault("FLWR_TELEMETRY_ENABLED", "0")  # CI has no network

N_PARTIES = 3


@pytest.fixture(scope="module")
def consortium():
    X, y = load_breast_cancer(return_X_y=True)
    X_public, X, y = X[:150], X[150:], y[150:]
    return X, y, np.arange(len(y)) % N_PARTIES, X_public


@pytest.mark.parametrize("clf", [
    FedKTClassifier(RandomForestClassifier(10, max_depth=4), random_state=0),
    FedCTClassifier(DecisionTreeClassifier(max_depth=3), n_rounds=3, random_state=0),
], ids=["fedkt-one-round", "fedct-rounds"])
def test_flower_simulation_gives_the_model_fit_gives(consortium, clf):
    from flwr.simulation import run_simulation

    from skfedkt.flower import client_app, server_app

    X, y, groups, X_public = consortium

    def party_data(context):
        party = int(context.node_config["partition-id"])
        return X[groups == party], y[groups == party], party

    served = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        run_simulation(
            server_app=server_app(clf, X_public, N_PARTIES,
                                  lambda model, context: served.append(model)),
            client_app=client_app(clf, party_data, X_public, classes=[0, 1]),
            num_supernodes=N_PARTIES,
            backend_config={"client_resources": {"num_cpus": 1},
                            "init_args": {"num_cpus": 2, "include_dashboard": False}},
        )
        fitted = clone(clf).fit(X, y, groups=groups, X_unlabeled=X_public)
    assert len(served) == 1, "the ServerApp did not finish"
    assert_array_equal(served[0].parties_, [0, 1, 2])
    assert_array_equal(served[0].predict_proba(X), fitted.predict_proba(X))
