"""Scale-out through dask.distributed gives the same model as a sequential fit."""

import numpy as np
import pytest
from joblib import parallel_config
from numpy.testing import assert_array_equal
from sklearn.datasets import make_classification
from sklearn.ensemble import RandomForestClassifier

from skfedkt import FedCTClassifier, FedKTClassifier, OneShotEnsembleClassifier

distributed = pytest.importorskip("dask.distributed")


@pytest.fixture(scope="module")
def dask_client():
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster:
        with distributed.Client(cluster) as client:
            yield client


@pytest.mark.parametrize("make", [
    lambda: FedKTClassifier(RandomForestClassifier(n_estimators=10), random_state=0),
    lambda: FedCTClassifier(RandomForestClassifier(n_estimators=10), n_rounds=3,
                            random_state=0),
    lambda: OneShotEnsembleClassifier(RandomForestClassifier(n_estimators=10),
                                      selection="cv", n_selected=3, random_state=0),
], ids=["fedkt", "fedct", "oneshot"])
def test_dask_backend_matches_sequential_fit(dask_client, make):
    X, y = make_classification(n_samples=600, n_features=8, random_state=0)
    X_public, X_train, y_train = X[:100], X[100:], y[100:]
    party = np.arange(500) % 5
    sequential = make().fit(X_train, y_train, groups=party, X_unlabeled=X_public)
    with parallel_config("dask"):
        scaled_out = make().fit(X_train, y_train, groups=party, X_unlabeled=X_public)
    assert_array_equal(scaled_out.predict_proba(X), sequential.predict_proba(X))
