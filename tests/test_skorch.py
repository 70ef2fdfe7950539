"""FedKT with a skorch-wrapped PyTorch network as the base estimator."""

import numpy as np
import pytest
from numpy.testing import assert_array_equal
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import FunctionTransformer, StandardScaler

from skfedkt import FedKTClassifier

torch = pytest.importorskip("torch")
skorch = pytest.importorskip("skorch")

from _data import federated_digits  # noqa: E402
from _torch_modules import MLP, to_float32  # noqa: E402

# loky says so when an idle worker timed out on a slow machine between two batches;
# the batch is resubmitted and the results are the same
pytestmark = pytest.mark.filterwarnings(
    "ignore:A worker stopped while some jobs were given to the executor:UserWarning")


def _network(device="cpu", float32=True):
    net = skorch.NeuralNetClassifier(
        MLP,
        module__n_features=64,
        module__n_classes=10,
        criterion=torch.nn.CrossEntropyLoss,
        optimizer=torch.optim.Adam,
        lr=0.01,
        max_epochs=30,
        batch_size=64,
        train_split=None,
        verbose=0,
        device=device,
    )
    if not float32:
        return make_pipeline(StandardScaler(), net)
    return make_pipeline(StandardScaler(), FunctionTransformer(to_float32), net)


@pytest.fixture(scope="module")
def digits_parties():
    # label skew: most parties miss several digits, so clones see gaps in the labels
    return federated_digits(n_parties=5)


def _fit_and_check(digits_parties, device, n_jobs=1):
    X_train, y_train, party, X_public, X_test, y_test = digits_parties
    assert any(len(np.unique(y_train[party == p])) < 10 for p in range(5))
    clf = FedKTClassifier(_network(device), n_students=1, n_jobs=n_jobs, random_state=0)
    clf.fit(X_train, y_train, groups=party, X_unlabeled=X_public)
    proba = clf.predict_proba(X_test)
    assert proba.shape == (len(X_test), 10)
    assert_array_equal(clf.classes_[proba.argmax(axis=1)], clf.predict(X_test))
    assert clf.score(X_test, y_test) > 0.6
    return clf


def test_skorch_network_base_on_cpu(digits_parties):
    first = _fit_and_check(digits_parties, "cpu")
    again = _fit_and_check(digits_parties, "cpu", n_jobs=2)
    # torch is seeded per clone: loky workers reproduce the sequential fit
    X_test = digits_parties[4]
    assert_array_equal(first.predict(X_test), again.predict(X_test))


def test_float64_rows_for_a_net_name_the_fix(digits_parties):
    X_train, y_train, party, X_public, _, _ = digits_parties
    clf = FedKTClassifier(_network(float32=False), n_students=1, random_state=0)
    with pytest.raises(TypeError, match=r"NeuralNetClassifier got float64 rows.*"
                                        r"FunctionTransformer\(to_float32\)"):
        clf.fit(X_train, y_train, groups=party, X_unlabeled=X_public)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_skorch_network_base_on_cuda(digits_parties):
    _fit_and_check(digits_parties, "cuda", n_jobs=2)
