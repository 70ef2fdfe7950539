"""FedAvgClassifier: averaging the weights of incrementally trained models."""

import pickle

import numpy as np
import pytest
from joblib import parallel_config
from numpy.testing import assert_allclose, assert_array_equal
from sklearn import config_context
from sklearn.base import clone
from sklearn.datasets import load_digits
from sklearn.ensemble import RandomForestClassifier
from sklearn.linear_model import SGDClassifier
from sklearn.model_selection import GridSearchCV, GroupKFold, train_test_split
from sklearn.neural_network import MLPClassifier
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import MinMaxScaler

from skfedkt import FedAvgClassifier, UploadError
from skfedkt._engine._weights import averaged_weights, model_weights
from skfedkt._fedavg._party import FedAvgParty
from skfedkt._fedavg._plan import FedAvgPlan
from skfedkt.datasets import dirichlet_partition
from skfedkt.privacy import party_membership_audit

SMALL_MLP = MLPClassifier(hidden_layer_sizes=(16,), batch_size=32)


@pytest.fixture(scope="module")
def digits():
    X, y = load_digits(return_X_y=True)
    X_train, X_test, y_train, y_test = train_test_split(X / 16, y, test_size=0.3,
                                                        stratify=y, random_state=0)
    party = dirichlet_partition(y_train, 4, beta=0.5, min_party_size=20, random_state=0)
    return X_train, y_train, party, X_test, y_test


@pytest.mark.parametrize("estimator", [SMALL_MLP, SGDClassifier(loss="log_loss")],
                         ids=["mlp", "sgd"])
def test_more_rounds_learn_more(digits, estimator):
    X, y, party, X_test, y_test = digits
    scores = [FedAvgClassifier(estimator, n_rounds=n_rounds, local_epochs=5,
                               random_state=0).fit(X, y, groups=party).score(X_test, y_test)
              for n_rounds in (1, 8)]
    assert scores[1] > scores[0] + 0.03


def test_the_model_is_the_row_weighted_average_of_the_last_round(digits):
    X, y, party, _, _ = digits
    clf = FedAvgClassifier(SMALL_MLP, n_rounds=2, random_state=0)
    fitted = clf.fit(X, y, groups=party)
    # the last round's uploads, from the parties' own steps on the first round's average
    uploads = [clf.fit_party(X[party == p], y[party == p], party=p, classes=np.arange(10))
               for p in fitted.parties_]
    message = clf.server_round(uploads, None)
    uploads = [clf.fit_party(X[party == p], y[party == p], party=p, classes=np.arange(10),
                             message=message) for p in fitted.parties_]
    rows = [np.sum(party == p) for p in fitted.parties_]
    expected = averaged_weights([upload.payload["weights"] for upload in uploads], rows)
    by_hand = [sum(r * w[i] for r, w in zip(rows, [u.payload["weights"] for u in uploads]))
               / sum(rows) for i in range(len(expected))]
    for got, average, manual in zip(model_weights(fitted.estimator_), expected, by_hand):
        assert_allclose(got, average)
        assert_allclose(average, manual)
    assert [entry["round"] for entry in fitted.history_] == [1, 2]
    assert fitted.n_rounds_ == 2


def test_every_party_starts_from_the_same_weights_then_its_own_seeds():
    plan = FedAvgPlan.of(FedAvgClassifier())
    a, b = (FedAvgParty(plan, name, np.arange(3), np.random.RandomState(seed))
            for seed, name in enumerate("ab"))
    assert a.round_seed(0, root=7) == b.round_seed(0, root=7)
    assert a.round_seed(1, root=7) != b.round_seed(1, root=7)


def test_a_party_without_some_classes_still_has_every_output(digits):
    X, y, party, X_test, _ = digits
    few = np.isin(y, [0, 1, 2])
    groups = np.where(few, 0, 1)  # party 0 has three classes, party 1 the others
    clf = FedAvgClassifier(SMALL_MLP, n_rounds=2, random_state=0).fit(X, y, groups=groups)
    assert clf.predict_proba(X_test).shape == (len(X_test), 10)
    assert_array_equal(clf.classes_, np.arange(10))


def test_results_identical_for_any_n_jobs_and_backend(digits):
    X, y, party, X_test, _ = digits
    fitted = []
    for n_jobs, backend in [(1, "loky"), (2, "loky"), (2, "threading")]:
        with parallel_config(backend=backend):
            fitted.append(FedAvgClassifier(SMALL_MLP, n_rounds=2, n_jobs=n_jobs,
                                           random_state=0).fit(X, y, groups=party))
    for clf in fitted[1:]:
        assert_array_equal(clf.predict_proba(X_test), fitted[0].predict_proba(X_test))


@pytest.mark.parametrize("estimator, error, match", [
    (RandomForestClassifier(), TypeError, "FedKTClassifier or OneShotEnsembleClassifier"),
    (MLPClassifier(solver="lbfgs"), ValueError, "solver='adam'"),
    (SGDClassifier(early_stopping=True), ValueError, "early_stopping=False"),
])
def test_models_that_cannot_be_averaged_are_refused_before_any_work(digits, estimator,
                                                                     error, match):
    X, y, party, _, _ = digits
    with pytest.raises(error, match=match):
        FedAvgClassifier(estimator).fit(X, y, groups=party)


def test_pipeline_grid_search_and_pickle(digits):
    X, y, party, X_test, _ = digits
    search = GridSearchCV(
        make_pipeline(MinMaxScaler(), FedAvgClassifier(SGDClassifier(), n_rounds=2,
                                                       random_state=0)),
        {"fedavgclassifier__local_epochs": [1, 2]}, cv=GroupKFold(2),
    )
    with config_context(enable_metadata_routing=True):
        search.fit(X, y, groups=party)  # groups reach the splitter and every fit
    # refit on every party's rows
    assert_array_equal(search.best_estimator_[-1].parties_, np.unique(party))
    model = search.best_estimator_
    assert_array_equal(pickle.loads(pickle.dumps(model)).predict(X_test), model.predict(X_test))


def test_deployed_rounds_give_the_model_fit_gives(digits, tmp_path):
    X, y, party, X_test, _ = digits
    clf = FedAvgClassifier(SMALL_MLP, n_rounds=2, random_state=0)
    fitted = clone(clf).fit(X, y, groups=party)
    message = None
    for round_ in range(3):
        uploads = []
        for p in fitted.parties_:
            path = tmp_path / f"party-{p}-round-{round_}.skfedkt"
            clf.fit_party(X[party == p], y[party == p], party=p, classes=np.arange(10),
                          message=message).save(path)
            uploads.append(path)
        if round_ == 2:
            break
        message_path = tmp_path / f"server-round-{round_}.skfedkt"
        clf.server_round(uploads, None, message=message).save(message_path)
        message = message_path
    server = clone(clf).fit_server(uploads, message=message)
    assert_array_equal(server.predict_proba(X_test), fitted.predict_proba(X_test))
    assert server.history_ == fitted.history_
    assert server.n_features_in_ == X.shape[1]


@pytest.fixture(scope="module")
def round_zero(digits):
    X, y, party, _, _ = digits
    clf = FedAvgClassifier(SMALL_MLP, n_rounds=2, random_state=0)
    uploads = [clf.fit_party(X[party == p], y[party == p], party=p, classes=np.arange(10))
               for p in np.unique(party)]
    return clf, uploads


FALSE_WEIGHTS = {
    "a layer of another shape": lambda w: w.__setitem__(0, w[0][:-1]),
    "weights that are not finite": lambda w: w[1].__setitem__(0, np.nan),
    "a missing layer": lambda w: w.pop(),
    "integer weights": lambda w: w.__setitem__(0, w[0].astype(np.int64)),
}


@pytest.mark.parametrize("change", FALSE_WEIGHTS.values(), ids=FALSE_WEIGHTS.keys())
def test_false_weights_are_refused_naming_the_party(round_zero, change):
    clf, uploads = round_zero
    crafted = pickle.loads(pickle.dumps(uploads[0]))
    change(crafted.payload["weights"])
    with pytest.raises(UploadError, match=f"Party {uploads[0].party!r}.*weights"):
        clf.server_round([crafted, *uploads[1:]], None)


def test_a_party_can_audit_its_upload(digits):
    X, y, party, X_test, y_test = digits
    clf = FedAvgClassifier(SGDClassifier(loss="log_loss"), n_rounds=2, random_state=0)
    audit = party_membership_audit(clf, X[party == 0], y[party == 0], party=0,
                                   classes=np.arange(10), X_unlabeled=None,
                                   X_holdout=X_test, y_holdout=y_test, n_reference=1,
                                   random_state=0)
    assert {row["release"] for row in audit.summary()} == {"upload"}
