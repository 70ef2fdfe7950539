"""OneShotEnsembleClassifier: thresholds, selection strategies, voting, distillation."""

import pickle
import sys
import threading
import warnings

import numpy as np
import pytest
from joblib import parallel_config
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.base import clone
from sklearn.datasets import load_breast_cancer, make_classification
from sklearn.exceptions import UndefinedMetricWarning
from sklearn.kernel_ridge import KernelRidge
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score
from sklearn.model_selection import train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.tree import DecisionTreeClassifier

from skfedkt import AssumptionWarning, OneShotEnsembleClassifier
from skfedkt._deployment._channel import without_sums
from skfedkt._deployment._upload import payload_bytes
from skfedkt.datasets import dirichlet_partition

SIZES = [5, 12, 40, 25, 60, 33, 8, 50]


@pytest.fixture(scope="module")
def uneven_parties():
    X, y = make_classification(n_samples=sum(SIZES) + 200, n_features=6, n_informative=4,
                               random_state=0)
    X_train, X_test, y_train, y_test = X[:233], X[233:], y[:233], y[233:]
    party = np.repeat(np.arange(len(SIZES)), SIZES)
    return X_train, y_train, party, X_test, y_test


def test_parties_below_min_samples_send_nothing(uneven_parties):
    X, y, party, *_ = uneven_parties
    clf = OneShotEnsembleClassifier(min_samples=30, random_state=0).fit(X, y, groups=party)
    assert_array_equal(clf.trained_parties_, [2, 4, 5, 7])
    assert [e.tree_.n_node_samples[0] for e in clf.estimators_] == [40, 60, 33, 50]
    assert_array_equal(clf.selected_parties_, clf.trained_parties_)  # selection="all"
    with pytest.raises(ValueError, match="the largest has 60 sample"):
        OneShotEnsembleClassifier(min_samples=61).fit(X, y, groups=party)


def test_data_selection_keeps_the_largest_parties(uneven_parties):
    X, y, party, *_ = uneven_parties
    clf = OneShotEnsembleClassifier(selection="data", n_selected=3).fit(X, y, groups=party)
    assert_array_equal(clf.selected_parties_, [2, 4, 7])


def test_random_selection_is_seeded_and_can_draw_every_party(uneven_parties):
    X, y, party, *_ = uneven_parties
    draws = [
        OneShotEnsembleClassifier(selection="random", n_selected=3, random_state=seed)
        .fit(X, y, groups=party).selected_parties_
        for seed in range(30)
    ]
    assert all(len(set(d)) == 3 for d in draws)
    assert set(np.concatenate(draws)) == set(range(len(SIZES)))
    again = OneShotEnsembleClassifier(selection="random", n_selected=3, random_state=4)
    assert_array_equal(again.fit(X, y, groups=party).selected_parties_, draws[4])


def test_cv_selection_keeps_the_best_validation_scores_refit_on_all_rows(uneven_parties):
    X, y, party, *_ = uneven_parties
    clf = OneShotEnsembleClassifier(selection="cv", n_selected=3, random_state=0)
    clf.fit(X, y, groups=party)
    scores = clf.local_scores_
    assert scores.shape == (len(SIZES),)
    ranked = np.argsort(-np.nan_to_num(scores, nan=-np.inf), kind="stable")[:3]
    assert_array_equal(clf.selected_parties_, np.sort(clf.trained_parties_[ranked]))
    # the models sent were trained on all of each party's rows
    assert [e.tree_.n_node_samples[0] for e in clf.estimators_] == SIZES
    # ROC AUC by default for two classes: the scores are not accuracies
    accuracy = clone(clf).set_params(scoring="accuracy").fit(X, y, groups=party)
    assert not np.allclose(np.nan_to_num(accuracy.local_scores_), np.nan_to_num(scores))


def test_undefined_validation_scores_rank_last():
    X = np.random.RandomState(0).normal(size=(60, 3))
    y = np.r_[np.zeros(20), np.tile([0, 1], 20)]
    party = np.repeat([0, 1, 2], 20)  # party 0 holds a single class: no ROC AUC
    clf = OneShotEnsembleClassifier(selection="cv", n_selected=2, random_state=0)
    clf.fit(X, y, groups=party)
    assert np.isnan(clf.local_scores_[0])
    assert_array_equal(clf.selected_parties_, [1, 2])


def test_probabilities_follow_global_classes_when_parties_miss_some():
    X, y = make_classification(n_samples=300, n_features=6, n_informative=4, n_classes=3,
                               random_state=0)
    labels = np.array(["low", "mid", "high"])[y]
    party = y % 2 + 2 * (np.arange(300) % 2)  # parties 0/2 never see 'mid'
    soft = OneShotEnsembleClassifier(LogisticRegression(), random_state=0).fit(
        X, labels, groups=party
    )
    assert_array_equal(soft.classes_, ["high", "low", "mid"])
    proba = soft.predict_proba(X)
    expected = np.zeros_like(proba)
    for label, model in zip(soft.trained_parties_, soft.estimators_):
        seen = np.searchsorted(soft.classes_, np.unique(labels[party == label]))
        expected[:, seen] += model.predict_proba(X)
    assert_allclose(proba, expected / 4)
    assert_array_equal(soft.classes_[proba.argmax(axis=1)], soft.predict(X))

    hard = clone(soft).set_params(voting="hard").fit(X, labels, groups=party)
    assert_allclose(hard.predict_proba(X) * 4, np.round(hard.predict_proba(X) * 4))


def test_regressor_student_learns_the_ensemble_probabilities(uneven_parties):
    X, y, party, X_test, _ = uneven_parties
    X_proxy = X_test[:100]
    teacher = OneShotEnsembleClassifier(LogisticRegression(), random_state=0).fit(
        X, y, groups=party
    )
    clf = clone(teacher).set_params(distill=True,
                                    final_estimator=KernelRidge(kernel="rbf", alpha=1e-3))
    clf.fit(X, y, groups=party, X_unlabeled=X_proxy)
    assert isinstance(clf.final_estimator_, KernelRidge)
    # one output per class, fit to the ensemble's probabilities on the proxy data
    outputs = clf.final_estimator_.predict(X_proxy)
    assert outputs.shape == (100, 2)
    assert_allclose(outputs, teacher.predict_proba(X_proxy), atol=0.05)
    test_outputs = clf.final_estimator_.predict(X_test)
    assert_array_equal(clf.predict(X_test), clf.classes_[test_outputs.argmax(axis=1)])
    scores = clf.decision_function(X_test)
    assert_allclose(scores, test_outputs[:, 1] - test_outputs[:, 0])
    assert_array_equal(clf.predict(X_test), clf.classes_[(scores > 0).astype(int)])
    assert not hasattr(clf, "predict_proba")


def test_classifier_student_learns_the_ensemble_labels(uneven_parties):
    X, y, party, X_test, _ = uneven_parties
    X_proxy = X_test[:100]
    clf = OneShotEnsembleClassifier(
        distill=True, final_estimator=DecisionTreeClassifier(random_state=0), random_state=0
    ).fit(X, y, groups=party, X_unlabeled=X_proxy)
    ensemble = clone(clf).set_params(distill=False, final_estimator=None).fit(
        X, y, groups=party)
    # an unpruned tree reproduces its training labels: the ensemble's predictions
    assert_array_equal(clf.predict(X_proxy), ensemble.predict(X_proxy))
    assert hasattr(clf, "predict_proba") and not hasattr(clf, "decision_function")


def test_distillation_without_a_public_set(uneven_parties):
    """`fit` distils on the training rows, saying so, as every algorithm whose steps
    need a public set does; a party's deployed step refuses to run without it."""
    X, y, party, *_ = uneven_parties
    clf = OneShotEnsembleClassifier(distill=True, final_estimator=KernelRidge())
    with pytest.warns(AssumptionWarning, match="training rows, without their labels"):
        clf.fit(X, y, groups=party)
    with pytest.raises(ValueError, match=r"needs the agreed public set \(distill=True "
                       r"distils the ensemble on it\): pass it as X_unlabeled"):
        clf.fit_party(X, y, party=0, classes=np.unique(y))


def test_a_final_estimator_without_distillation_is_an_error(uneven_parties):
    X, y, party, *_ = uneven_parties
    clf = OneShotEnsembleClassifier(final_estimator=KernelRidge())
    with pytest.raises(ValueError, match="pass distill=True to distil"):
        clf.fit(X, y, groups=party)


def test_distillation_defaults_to_a_clone_of_the_local_model(uneven_parties):
    X, y, party, X_test, _ = uneven_parties
    clf = OneShotEnsembleClassifier(LogisticRegression(), distill=True, random_state=0)
    clf.fit(X, y, groups=party, X_unlabeled=X_test[:100])
    assert isinstance(clf.final_estimator_, LogisticRegression)
    assert clf.predict_proba(X_test).shape == (len(X_test), 2)


def test_results_identical_for_any_n_jobs_and_backend(uneven_parties):
    X, y, party, X_test, _ = uneven_parties
    fitted = []
    for n_jobs, backend in [(1, "loky"), (2, "loky"), (2, "threading")]:
        with parallel_config(backend=backend):
            clf = OneShotEnsembleClassifier(selection="cv", n_selected=4, n_jobs=n_jobs,
                                            random_state=0)
            fitted.append(clf.fit(X, y, groups=party))
    for clf in fitted[1:]:
        assert_array_equal(clf.local_scores_, fitted[0].local_scores_)
        assert_array_equal(clf.predict_proba(X_test), fitted[0].predict_proba(X_test))


def test_scoring_in_threads_leaves_the_warning_filters_alone(uneven_parties, monkeypatch):
    # catch_warnings swaps the process's filters: threads that left it out of order
    # would leave a filter behind, so the party step enters it in the main thread only
    X, y, party, *_ = uneven_parties
    catch_warnings, threads = warnings.catch_warnings, []

    def recording(*args, **kwargs):
        if sys._getframe(1).f_globals["__name__"] == "skfedkt._oneshot._party":
            threads.append(threading.current_thread())
        return catch_warnings(*args, **kwargs)

    filters = list(warnings.filters)
    monkeypatch.setattr(warnings, "catch_warnings", recording)
    with catch_warnings():
        # an undefined default ROC AUC is NaN without calling the scorer
        warnings.simplefilter("error", UndefinedMetricWarning)
        for n_jobs, backend in [(1, "loky"), (2, "threading")]:
            with parallel_config(backend=backend):
                clf = OneShotEnsembleClassifier(selection="cv", n_selected=4, n_jobs=n_jobs,
                                                random_state=0).fit(X, y, groups=party)
            assert np.isnan(clf.local_scores_).any()  # single-class validation rows
    assert threads and set(threads) == {threading.main_thread()}
    assert warnings.filters == filters


def test_pickle_round_trip(uneven_parties):
    X, y, party, X_test, _ = uneven_parties
    clf = OneShotEnsembleClassifier(LogisticRegression(), selection="data", n_selected=3)
    clf.fit(X, y, groups=party)
    assert_array_equal(pickle.loads(pickle.dumps(clf)).predict_proba(X_test),
                       clf.predict_proba(X_test))


def test_selected_ensembles_beat_local_models_on_many_small_parties():
    """The paper's comparison: mean local AUC vs selected ensembles vs all data."""
    X, y = load_breast_cancer(return_X_y=True)
    X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.25, stratify=y,
                                                        random_state=0)
    party = dirichlet_partition(y_train, 20, beta=0.5, min_party_size=5, random_state=0)
    # the paper's RBF SVMs need SVC(probability=True), deprecated in scikit-learn 1.9
    base = make_pipeline(StandardScaler(), LogisticRegression())

    def auc(model):
        return roc_auc_score(y_test, model.predict_proba(X_test)[:, 1])

    local = np.mean([
        auc(clone(base).fit(X_train[party == p], y_train[party == p]))
        if (party == p).sum() >= 10 and len(np.unique(y_train[party == p])) == 2 else 0.5
        for p in range(20)
    ])
    ideal = auc(clone(base).fit(X_train, y_train))
    for selection in ["all", "cv", "data", "random"]:
        clf = OneShotEnsembleClassifier(base, selection=selection, n_selected=5,
                                        min_samples=10, random_state=0)
        ensemble = auc(clf.fit(X_train, y_train, groups=party))
        # measured (3 splits): local 0.78, ensembles 0.98-0.99, all data 0.99
        assert ensemble > local + 0.10
        assert ensemble > ideal - 0.03


def test_every_trained_party_uploads_its_model(uneven_parties):
    # one round: every party that can train sends its model; the server selects
    X, y, party, *_ = uneven_parties
    clf = OneShotEnsembleClassifier(selection="data", n_selected=3, min_samples=10,
                                    random_state=0)
    clf.fit(X, y, groups=party)
    assert len(clf.selected_parties_) == 3
    uploads = [clf.fit_party(X[party == label], y[party == label], party=label,
                             classes=clf.classes_) for label in clf.parties_]
    with_model = [upload.party for upload in uploads if upload.payload["model"] is not None]
    assert_array_equal(with_model, clf.trained_parties_)
    for label, upload in zip(clf.parties_, uploads):
        # its model (skops writes object ids, which compress a few bytes differently
        # each time), and the arrays of its sums
        sums = sum(values.nbytes for values in upload.payload["sums"].values())
        model = (payload_bytes(without_sums(upload).payload)
                 if upload.payload["model"] is not None else 0)
        assert clf.upload_bytes_[label] == pytest.approx(model + sums, rel=0.01)
