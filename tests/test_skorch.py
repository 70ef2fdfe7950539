"""FedKT with a skorch-wrapped PyTorch network as the base estimator."""

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.base import clone
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import FunctionTransformer, StandardScaler

from skfedkt import FedAvgClassifier, FedKTClassifier, config_context
from skfedkt._engine._weights import initial_weights, model_weights, started_model, train_epoch

torch = pytest.importorskip("torch")
skorch = pytest.importorskip("skorch")

from _data import federated_digits  # noqa: E402
from _rounds import fit_through_files  # noqa: E402
from _torch_modules import MLP, DeviceRecorder, to_float32  # noqa: E402

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


def _fit_and_check(digits_parties, device, n_jobs=1, record_in=None):
    X_train, y_train, party, X_public, X_test, y_test = digits_parties
    assert any(len(np.unique(y_train[party == p])) < 10 for p in range(5))
    net = _network(device)
    if record_in is not None:
        net.set_params(neuralnetclassifier__callbacks=[("device",
                                                        DeviceRecorder(record_in))])
    clf = FedKTClassifier(net, n_students=1, n_jobs=n_jobs, random_state=0)
    clf.fit(X_train, y_train, groups=party, X_unlabeled=X_public)
    proba = clf.predict_proba(X_test)
    assert proba.shape == (len(X_test), 10)
    assert_array_equal(clf.classes_[proba.argmax(axis=1)], clf.predict(X_test))
    assert clf.score(X_test, y_test) > 0.6
    return clf


def test_skorch_network_base_on_cpu(digits_parties, tmp_path):
    first = _fit_and_check(digits_parties, "cpu")
    again = _fit_and_check(digits_parties, "cpu", n_jobs=2)
    # every tier's nets trained together, in one chunk: the same in worker processes
    X_test = digits_parties[4]
    assert_array_equal(first.predict(X_test), again.predict(X_test))
    assert [t["path"] for t in again.tier_fits_] == ["stacked", "stacked", "stacked"]
    # the check a GPU run makes, on the CPU: every teacher, student and final model
    # trained with the net's device, its weights there, in the worker processes too
    # (a callback: one by one)
    recorded = _fit_and_check(digits_parties, "cpu", n_jobs=2, record_in=tmp_path)
    assert {(t["path"], t["reason"]) for t in recorded.tier_fits_[:2]} == {
        ("per-clone", "callback device (DeviceRecorder): it acts on each net's own "
                      "training loop")}
    fits = [path.read_text().split() for path in tmp_path.iterdir()]
    assert len(fits) == recorded.n_teachers_.sum() + len(recorded.parties_) + 1
    assert {(given, placed) for given, placed, _ in fits} == {("cpu", "cpu")}


def test_float64_rows_for_a_net_name_the_fix(digits_parties):
    X_train, y_train, party, X_public, _, _ = digits_parties
    clf = FedKTClassifier(_network(float32=False), n_students=1, random_state=0)
    with pytest.raises(TypeError, match=r"NeuralNetClassifier got float64 rows.*"
                                        r"FunctionTransformer\(to_float32\)"):
        clf.fit(X_train, y_train, groups=party, X_unlabeled=X_public)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_skorch_network_base_on_cuda(digits_parties):
    _fit_and_check(digits_parties, "cuda", n_jobs=2)



def _averaged_net(max_epochs=1):
    """A net FedAvg averages: stateless steps only before it (every party feeds it
    the same features)."""
    return make_pipeline(FunctionTransformer(to_float32), skorch.NeuralNetClassifier(
        MLP, module__n_features=64, module__n_classes=10,
        criterion=torch.nn.CrossEntropyLoss, optimizer=torch.optim.Adam, lr=0.01,
        max_epochs=max_epochs, batch_size=32, train_split=None, verbose=0))


def test_fedavg_and_fedprox_average_a_skorch_net(digits_parties, tmp_path):
    X_train, y_train, party, X_public, X_test, y_test = digits_parties
    X_train, X_public, X_test = X_train / 16, X_public / 16, X_test / 16
    fedavg = FedAvgClassifier(_averaged_net(), n_rounds=3, local_epochs=2, random_state=0)
    scores = {}
    for name, clf in {"fedavg": fedavg, "fedprox": clone(fedavg).set_params(proximal_mu=0.1),
                      "fedavg, 2 jobs": clone(fedavg).set_params(n_jobs=2)}.items():
        clf.fit(X_train, y_train, groups=party)
        scores[name] = list(clf.staged_score(X_test, y_test))
    # every round learns more (three rounds of two epochs: far from trained)
    assert np.all(np.diff(scores["fedavg"]) > 0.1)
    # torch is seeded per clone: loky workers train exactly as one process does
    assert scores["fedavg, 2 jobs"] == scores["fedavg"]
    assert scores["fedprox"] != scores["fedavg"]
    # the deployed rounds, through upload files, give fit's model: where fit trained
    # every party's net in one stack and each party its own, within rounding
    (tmp_path / "stacked").mkdir()
    (tmp_path / "alone").mkdir()
    server, _ = fit_through_files(fedavg, X_train, y_train, party, tmp_path / "stacked")
    assert_allclose(server.predict_proba(X_test), fedavg.predict_proba(X_test), atol=1e-5)
    # where both trained each net alone, to the bit
    with config_context(stack_networks=False):
        alone = clone(fedavg).fit(X_train, y_train, groups=party)
        server, _ = fit_through_files(alone, X_train, y_train, party, tmp_path / "alone")
    assert_array_equal(server.predict_proba(X_test), alone.predict_proba(X_test))


def test_a_large_proximal_weight_keeps_a_net_near_the_global_weights():
    X, y = np.random.RandomState(0).rand(64, 64), np.arange(64) % 10
    net = _averaged_net(max_epochs=1)
    start = initial_weights(net, X, y, 10, seed=0)
    distances = []
    for mu in (0.0, 100.0):
        model = started_model(net, X, y, 10, 1, start, proximal_mu=mu)
        for _ in range(5):
            train_epoch(model, X, y)
        distances.append(sum(np.sum((w - s) ** 2)
                             for w, s in zip(model_weights(model), start)))
    assert distances[1] < distances[0] / 5


def test_fedavg_refuses_a_pipeline_that_learns_from_each_partys_rows(digits_parties):
    X_train, y_train, party, _, _, _ = digits_parties
    with pytest.raises(TypeError, match="standardscaler.*Scale the data before the fit"):
        FedAvgClassifier(_network()).fit(X_train, y_train, groups=party)
