"""DSFLClassifier: soft labels round after round, the parties' vote or a distilled
model, the same model through files as in fit, and what it refuses."""

import re
import warnings

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.base import clone
from sklearn.datasets import load_breast_cancer
from sklearn.ensemble import RandomForestClassifier
from sklearn.neighbors import KNeighborsClassifier
from sklearn.tree import DecisionTreeClassifier

import skfedkt
from skfedkt import DSFLClassifier, PartyUpload
from skfedkt._dsfl._server import sharpened, soft_labels_changed

from _rounds import fit_through_files


@pytest.fixture(scope="module")
def consortium():
    """Four parties' rows with their labels skewed, a public set and a test set."""
    X, y = load_breast_cancer(return_X_y=True)
    rng = np.random.RandomState(0)
    order = rng.permutation(len(y))
    X, y = X[order], y[order]
    X_public, X_test, X, y = X[:120], X[120:220], X[220:], y[220:]
    # two parties hold mostly one class, two mostly the other
    party = np.where(rng.random_sample(len(y)) < 0.8, 2 * y, 2 * (1 - y)) + rng.randint(
        2, size=len(y))
    return X, y, party, X_public, X_test


def _fit(clf, consortium):
    X, y, party, X_public, _ = consortium
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return clone(clf).fit(X, y, groups=party, X_unlabeled=X_public)


def _tree():
    return DecisionTreeClassifier(max_depth=4)


def test_soft_labels_are_the_parties_averaged_probabilities(consortium):
    X, y, party, X_public, _ = consortium
    clf = _fit(DSFLClassifier(_tree(), n_rounds=2, distill=True, random_state=0),
               consortium)
    # with distill=True the last soft labels are the final models' average
    assert clf.soft_labels_.shape == (len(X_public), 2)
    assert_allclose(clf.soft_labels_.sum(axis=1), 1.0)
    assert (clf.soft_labels_ >= 0).all()
    assert clf.n_rounds_ == len(clf.history_) <= 2
    assert clf.history_[0]["soft_labels_changed"] == 1.0
    assert all(entry["bytes_sent"] == 8 * len(X_public) * 2 for entry in clf.history_)
    assert all(0 <= entry["train_accuracy"] <= 1 for entry in clf.history_)


def test_the_parties_vote_averages_their_last_models(consortium):
    *_, X_test = consortium
    clf = _fit(DSFLClassifier(_tree(), n_rounds=3, random_state=0), consortium)
    assert len(clf.estimators_) == 4 and not hasattr(clf, "final_estimator_")
    proba = np.mean([model.predict_proba(X_test) for model in clf.estimators_], axis=0)
    # every party's rows held both classes, so its model's columns are the classes'
    assert_allclose(clf.predict_proba(X_test), proba)
    assert_array_equal(clf.predict(X_test), clf.classes_[proba.argmax(axis=1)])


def test_a_low_temperature_sharpens_and_a_high_one_flattens():
    average = np.array([[0.6, 0.4], [0.5, 0.5], [1.0, 0.0]])
    assert sharpened(average, 1.0) is average
    sharp, flat = sharpened(average, 0.1), sharpened(average, 10.0)
    assert sharp[0, 0] > 0.98 and 0.5 < flat[0, 0] < 0.52
    assert_allclose(sharp[1:], average[1:])
    assert_allclose(flat[2], [1.0, 0.0])
    assert soft_labels_changed(average, None) == 1.0
    assert soft_labels_changed(sharp, average) == pytest.approx(
        np.mean(np.abs(sharp - average).sum(axis=1)) / 2)


def test_the_rounds_stop_once_the_soft_labels_settle(consortium):
    settled = _fit(DSFLClassifier(_tree(), n_rounds=10, tol=1.0, random_state=0),
                   consortium)
    # round 1 moves them from nothing; round 2 moves them less than tol=1: settled
    assert settled.n_rounds_ == 2
    capped = _fit(DSFLClassifier(_tree(), n_rounds=2, tol=0.0, random_state=0), consortium)
    assert capped.n_rounds_ == 2


@pytest.mark.parametrize("params", [dict(), dict(n_rounds=0), dict(distill=True),
                                    dict(temperature=0.5, n_rounds=2, voting="hard")],
                         ids=["vote", "local-only", "distilled", "sharpened"])
def test_files_give_the_model_fit_gives(consortium, tmp_path, params):
    X, y, party, X_public, X_test = consortium
    clf = DSFLClassifier(_tree(), random_state=0, **params)
    fitted = _fit(clf, consortium)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        server, _ = fit_through_files(clf, X, y, party, tmp_path, X_public)
    assert_array_equal(server.predict_proba(X_test), fitted.predict_proba(X_test))
    assert server.history_ == fitted.history_
    assert_array_equal(server.soft_labels_, fitted.soft_labels_)


def test_results_do_not_depend_on_n_jobs(consortium):
    *_, X_test = consortium
    one = _fit(DSFLClassifier(RandomForestClassifier(n_estimators=5), n_rounds=2,
                              random_state=0), consortium)
    two = _fit(DSFLClassifier(RandomForestClassifier(n_estimators=5), n_rounds=2,
                              n_jobs=2, random_state=0), consortium)
    assert_array_equal(one.predict_proba(X_test), two.predict_proba(X_test))


def test_secure_aggregation_gives_the_distilled_model_and_refuses_the_vote(consortium):
    *_, X_test = consortium
    clf = DSFLClassifier(_tree(), n_rounds=2, distill=True, random_state=0)
    plain = _fit(clf, consortium)
    with skfedkt.config_context(secure_aggregation=True):
        secure = _fit(clf, consortium)
        with pytest.raises(ValueError, match=re.escape(
                "distill=False (the parties' vote) needs each party's model")):
            _fit(DSFLClassifier(_tree()), consortium)
    # the parties' probabilities are multiples of 2**-20, which both sums add exactly
    assert_array_equal(secure.predict_proba(X_test), plain.predict_proba(X_test))
    assert_array_equal(secure.soft_labels_, plain.soft_labels_)


@pytest.mark.parametrize("params, match", [
    (dict(estimator=KNeighborsClassifier()),
     "KNeighborsClassifier takes no sample_weight in fit: use a classifier that does"),
    (dict(distill=True, final_estimator=KNeighborsClassifier()),
     "KNeighborsClassifier takes no sample_weight"),
    (dict(distill=True, n_rounds=0), "distill=True fits a model on the last round's "
     "soft labels of the public rows, and n_rounds=0 makes none"),
    (dict(estimator=[_tree()] * 4, distill=True), "pass final_estimator"),
    (dict(temperature=0.0), "The 'temperature' parameter of DSFLClassifier must be"),
])
def test_settings_it_cannot_run_are_refused_before_any_work(consortium, params, match):
    X, y, party, X_public, _ = consortium
    with pytest.raises(ValueError, match=match):
        DSFLClassifier(**params).fit(X, y, groups=party, X_unlabeled=X_public)


@pytest.mark.parametrize("sent, match", [
    ([5.0, -4.0], "sums.probabilities: a value of magnitude 5, beyond the bound 1"),
    ([1.0, 1.0], "sums.probabilities: rows that are not non-negative and summing to 1"),
], ids=["beyond the bound", "within it"])
def test_the_server_refuses_probabilities_that_are_not_a_distribution(
        consortium, tmp_path, sent, match):
    X, y, party, X_public, _ = consortium
    clf = DSFLClassifier(_tree(), n_rounds=2, random_state=0)
    paths = []
    for p in np.unique(party):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            upload = clf.fit_party(X[party == p], y[party == p], party=p, classes=[0, 1],
                                   X_unlabeled=X_public)
        if p == 1:  # a hostile party steers the soft labels toward class 0
            sums = dict(upload.payload["sums"])
            sums["probabilities"] = np.tile(sent, (len(X_public), 1))
            upload = PartyUpload(manifest=upload.manifest,
                                 payload=dict(upload.payload, sums=sums))
        paths.append(tmp_path / f"party-{p}.skfedkt")
        upload.save(paths[-1])
    with pytest.raises(ValueError, match=r"Party 1 \(.*party-1.skfedkt\) refused: "
                       + re.escape(match)):
        clf.server_round(paths, X_public)


def test_a_fitted_model_reports_what_it_lets_out(consortium):
    X, y, party, X_public, _ = consortium
    clf = _fit(DSFLClassifier(_tree(), n_rounds=1, random_state=0), consortium)
    names = [(release.name, release.party) for release in clf._releases.of_fit(clf)]
    assert ("probabilities", 0) in names and ("local model", 3) in names
    assert names[-1] == ("final model", None)


@pytest.mark.parametrize("public_weight, total", [("balanced", 30.0), (2.0, 240.0)])
def test_the_public_rows_weigh_as_public_weight_says(public_weight, total):
    from skfedkt._dsfl._party import DSFLParty
    from skfedkt._dsfl._plan import DSFLPlan

    plan = DSFLPlan.of(DSFLClassifier(_tree(), public_weight=public_weight))
    party = DSFLParty(plan, "a", _tree(), np.arange(30), np.zeros(30, dtype=int),
                      np.random.RandomState(0))
    task = party.task(np.full((120, 2), 0.5), 30 + np.arange(120))
    assert_array_equal(task.sample_weight[:30], 1.0)
    # each public row once per class, the pair weighing what one public row weighs
    assert len(task.rows) == 30 + 240 and task.sample_weight[30:].sum() == total
