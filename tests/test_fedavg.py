"""FedAvgClassifier: averaging the weights of incrementally trained models."""

import inspect
import pickle
import warnings

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

from skfedkt import (
    FedAvgClassifier,
    FedCTClassifier,
    FedKTClassifier,
    LabelCollapseWarning,
    UploadError,
    load_model,
    save_model,
)
from skfedkt._engine._weights import (
    averaged_weights,
    model_of,
    model_weights,
    started_model,
)
from skfedkt._fedavg._party import FedAvgParty
from skfedkt._fedavg._sums import party_weights_of
from skfedkt._fedavg._plan import FedAvgPlan
from skfedkt.datasets import dirichlet_partition
from skfedkt.privacy import ServerNoise, party_membership_audit

from _rounds import fit_through_files  # noqa: E402

SMALL_MLP = MLPClassifier(hidden_layer_sizes=(16,), batch_size=32)

# MLPClassifier's private gradient takes sample weights from scikit-learn 1.7 on
SAMPLE_WEIGHTED = "sample_weight" in inspect.signature(MLPClassifier._backprop).parameters


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
    expected = averaged_weights([weights_of(upload) for upload in uploads], rows)
    by_hand = [sum(r * w[i] for r, w in zip(rows, [weights_of(u) for u in uploads]))
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


def test_a_fitted_model_is_a_model_file_anyone_may_load(digits, tmp_path):
    X, y, party, X_test, _ = digits
    model = FedAvgClassifier(MLPClassifier(hidden_layer_sizes=(8,)), n_rounds=2,
                             proximal_mu=0.1, random_state=0).fit(X, y, groups=party)
    save_model(model, tmp_path / "fedprox.skops")
    loaded = load_model(tmp_path / "fedprox.skops")
    assert_array_equal(loaded.predict_proba(X_test), model.predict_proba(X_test))


def test_deployed_rounds_give_the_model_fit_gives(digits, tmp_path):
    X, y, party, X_test, _ = digits
    clf = FedAvgClassifier(SMALL_MLP, n_rounds=2, random_state=0)
    fitted = clone(clf).fit(X, y, groups=party)
    server, _ = fit_through_files(clf, X, y, party, tmp_path)
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
    "a layer of another shape": (lambda w: w.__setitem__("weighted_0", w["weighted_0"][:-1]),
                                 "sums: its sums are not the names, shapes and kinds"),
    "weights that are not finite": (lambda w: w["weighted_1"].__setitem__(0, np.nan),
                                    "sums.weighted_1: values must be finite"),
    "a missing layer": (lambda w: w.pop("weighted_3"),
                        "sums: its sums are not the names, shapes and kinds"),
    "integer weights": (lambda w: w.__setitem__("weighted_0",
                                                w["weighted_0"].astype(np.int64)),
                        "sums.weighted_0: not an array of floats"),
    "weights beyond the bound": (lambda w: w["weighted_2"].__setitem__(0, 2.0 ** 40),
                                 "sums.weighted_2: a value of magnitude"),
}


def weights_of(upload):
    """A party's weights, from what it sends in the sum: its weights times its rows."""
    return party_weights_of(upload.payload["sums"])


@pytest.mark.parametrize("change, match", FALSE_WEIGHTS.values(), ids=FALSE_WEIGHTS.keys())
def test_false_weights_are_refused_naming_the_party(round_zero, change, match):
    clf, uploads = round_zero
    crafted = pickle.loads(pickle.dumps(uploads[0]))
    change(crafted.payload["sums"])
    with pytest.raises(UploadError, match=f"Party {uploads[0].party!r} refused: {match}"):
        clf.server_round([crafted, *uploads[1:]], None)


def test_a_party_can_audit_its_upload(digits):
    X, y, party, X_test, y_test = digits
    clf = FedAvgClassifier(SGDClassifier(loss="log_loss"), n_rounds=2, random_state=0)
    audit = party_membership_audit(clf, X[party == 0], y[party == 0], party=0,
                                   classes=np.arange(10), X_unlabeled=None,
                                   X_holdout=X_test, y_holdout=y_test, n_reference=1,
                                   random_state=0)
    assert {row["release"] for row in audit.summary()} == {"upload"}


# --- FedProx, FedDF, FedKT as the first round, the rounds' staged predictions ---------

def test_the_proximal_gradient_is_the_mlps_plus_mu_times_the_distance(digits):
    X, y, _, _, _ = digits
    model = started_model(SMALL_MLP, X[:50], y[:50], 10, seed=0)
    anchor = model_weights(model)
    shifted = [w + 0.5 for w in anchor]
    plain = started_model(SMALL_MLP, X[:50], y[:50], 10, 0, shifted)
    proximal = started_model(SMALL_MLP, X[:50], y[:50], 10, 0, shifted, proximal_mu=3.0)
    proximal.anchor = anchor
    gradients = []
    for net in (plain, proximal):
        layers = [*net.coefs_, *net.intercepts_]
        activations = [X[:50]] + [None] * (net.n_layers_ - 1)
        gradients.append(net._backprop(
            X[:50], np.eye(10)[y[:50]], *([None] if SAMPLE_WEIGHTED else []), activations,
            [None] * (net.n_layers_ - 1), [np.empty_like(w) for w in net.coefs_],
            [np.empty_like(b) for b in net.intercepts_]))
    (plain_loss, *plain_grads), (prox_loss, *prox_grads) = gradients
    assert prox_loss == pytest.approx(plain_loss + 3.0 / 2 * sum(
        np.sum((w - a) ** 2) for w, a in zip(layers, anchor)))
    for got, base, weight, start in zip([*prox_grads[0], *prox_grads[1]],
                                        [*plain_grads[0], *plain_grads[1]], layers, anchor):
        assert_allclose(got, base + 3.0 * (weight - start))


def test_a_large_proximal_weight_keeps_a_party_near_the_global_weights(digits):
    X, y, party, _, _ = digits
    distances = []
    for mu in (0.0, 10.0):
        clf = FedAvgClassifier(SMALL_MLP, n_rounds=2, local_epochs=3, proximal_mu=mu,
                               random_state=0)
        message = clf.server_round(
            [clf.fit_party(X[party == p], y[party == p], party=p, classes=np.arange(10))
             for p in np.unique(party)], None)
        upload = clf.fit_party(X[party == 0], y[party == 0], party=0, classes=np.arange(10),
                               message=message)
        distances.append(sum(np.sum((w - g) ** 2) for w, g in
                             zip(weights_of(upload), message.payload["weights"])))
    assert distances[1] < distances[0] / 5


@pytest.mark.parametrize("params, error, match", [
    (dict(estimator=SGDClassifier(), proximal_mu=0.1), ValueError, "MLPClassifier"),
    (dict(estimator=SGDClassifier(), distill_epochs=2), ValueError, "log_loss"),
    (dict(init=FedCTClassifier()), TypeError, "FedKTClassifier"),
    (dict(init=FedKTClassifier(distill=False)), TypeError, "distill=True"),
    (dict(init=FedKTClassifier(MLPClassifier((5,)))), ValueError, "hidden_layer_sizes"),
    (dict(init=FedKTClassifier(SMALL_MLP, privacy=ServerNoise())), ValueError,
     "privacy=None"),
])
def test_variants_the_rounds_cannot_run_are_refused_before_any_work(digits, params, error,
                                                                     match):
    X, y, party, _, _ = digits
    with pytest.raises(error, match=match):
        FedAvgClassifier(**dict(dict(estimator=SMALL_MLP), **params)).fit(X, y, groups=party)


@pytest.mark.parametrize("params", [dict(distill_epochs=2), dict(init=FedKTClassifier(SMALL_MLP))],
                         ids=["feddf", "init"])
def test_the_deployed_steps_of_feddf_and_a_first_round_need_the_public_set(digits, params):
    X, y, party, _, _ = digits
    clf = FedAvgClassifier(SMALL_MLP, **params)
    with pytest.raises(ValueError, match=f"needs the agreed public set \\({list(params)[0]}"):
        clf.fit_party(X[party == 0], y[party == 0], party=0, classes=np.arange(10))


def test_feddf_distils_the_parties_models_into_the_average(digits):
    X, y, party, X_test, _ = digits
    X_public = X_test[:200]
    fedavg = FedAvgClassifier(SMALL_MLP, n_rounds=1, local_epochs=20, random_state=0)
    feddf = clone(fedavg).set_params(distill_epochs=20)
    models = [clf.fit(X, y, groups=party, X_unlabeled=X_public) for clf in (fedavg, feddf)]
    # the same parties' weights, averaged, then trained on the public rows
    assert not np.allclose(models[0].predict_proba(X_test), models[1].predict_proba(X_test))
    ensemble = np.mean([model.predict_proba(X_public) for model in party_models(
        fedavg, X, y, party)], axis=0).argmax(axis=1)
    assert (np.mean(models[1].predict(X_public) == ensemble)
            > np.mean(models[0].predict(X_public) == ensemble))


def party_models(clf, X, y, party):
    """Every party's model of round 0, from its own upload."""
    return [model_of(SMALL_MLP, weights_of(clf.fit_party(X[party == p], y[party == p],
                                                         party=p, classes=np.arange(10))),
                     10)
            for p in np.unique(party)]


@pytest.fixture(scope="module")
def fedkt_prox(digits):
    X, y, party, X_test, _ = digits
    return FedAvgClassifier(SMALL_MLP, n_rounds=2, local_epochs=2, proximal_mu=0.1,
                            init=FedKTClassifier(clone(SMALL_MLP).set_params(max_iter=10),
                                                 n_students=1, n_teachers=2),
                            random_state=0), X_test[:150]


def test_a_first_round_of_fedkt_is_fedkts_own_model(digits, fedkt_prox):
    X, y, party, X_test, _ = digits
    clf, X_public = fedkt_prox
    first = clone(clf).set_params(n_rounds=1).fit(X, y, groups=party, X_unlabeled=X_public)
    fedkt = clone(clf.init).set_params(random_state=0).fit(X, y, groups=party,
                                                            X_unlabeled=X_public)
    assert_array_equal(first.predict_proba(X_test), fedkt.predict_proba(X_test))
    assert first.history_[0]["train_accuracy"] is None


def test_deployed_rounds_after_a_first_round_give_the_model_fit_gives(digits, fedkt_prox,
                                                                        tmp_path):
    X, y, party, X_test, _ = digits
    clf, X_public = fedkt_prox
    fitted = clone(clf).fit(X, y, groups=party, X_unlabeled=X_public)
    server, _ = fit_through_files(clf, X, y, party, tmp_path, X_public)
    assert_array_equal(server.predict_proba(X_test), fitted.predict_proba(X_test))
    # a round-0 upload holds students, which a later round refuses
    files = {round_: [tmp_path / f"party-{p}-round-{round_}.skfedkt" for p in fitted.parties_]
             for round_ in (0, 1)}
    message = clf.server_round(files[0], X_public)
    with pytest.raises(UploadError, match="round"):
        clf.server_round([files[0][0], *files[1][1:]], X_public, message=message)


def test_staged_scores_follow_the_rounds_and_end_at_the_model(digits):
    X, y, party, X_test, y_test = digits
    clf = FedAvgClassifier(SMALL_MLP, n_rounds=3, random_state=0).fit(X, y, groups=party)
    scores = list(clf.staged_score(X_test, y_test))
    assert len(scores) == 3
    assert scores[-1] == clf.score(X_test, y_test)
    last = list(clf.staged_predict_proba(X_test))[-1]
    assert_array_equal(last, clf.predict_proba(X_test))
    assert_array_equal(next(clf.staged_predict(X_test)),
                       clone(clf).set_params(n_rounds=1).fit(X, y, groups=party
                                                             ).predict(X_test))


def test_a_first_round_in_a_plain_fit_says_nothing_of_claimed_rows(digits):
    # the server's bound on a party's weight warns of rows a party claims in its upload;
    # in fit the rows are the pooled data's, whatever the parties' sizes
    X, y, _, X_public, *_ = digits
    party = np.r_[np.zeros(len(y) - 120), np.ones(60), np.full(60, 2)]
    mlp = MLPClassifier((16,), max_iter=5)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        FedAvgClassifier(mlp, n_rounds=1, init=FedKTClassifier(mlp), random_state=0).fit(
            X, y, groups=party, X_unlabeled=X_public)
    assert not [w for w in caught if "claim more rows" in str(w.message)]


def test_a_model_that_predicts_one_class_is_said():
    from sklearn.datasets import load_breast_cancer

    X, y = load_breast_cancer(return_X_y=True)  # unscaled: an MLP learns little in 2 rounds
    with pytest.warns(LabelCollapseWarning, match="The averaged model predicts on the "
                      "training rows a single class.*scale them"):
        FedAvgClassifier(MLPClassifier((16,)), n_rounds=2, random_state=0).fit(
            X, y, groups=np.arange(len(y)) % 3)
