"""Secure aggregation in the one-shot ensemble and in FedAvg (FedProx, FedDF, a one-shot
first round): the server steps receive sums alone and give the plain path's model (its
weights within the fixed point's stated error); what needs more than sums is refused."""

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.linear_model import LogisticRegression, SGDClassifier
from sklearn.neural_network import MLPClassifier
from sklearn.tree import DecisionTreeClassifier

import skfedkt
from skfedkt import FedAvgClassifier, LabelCollapseWarning, OneShotEnsembleClassifier
from dataclasses import replace

from skfedkt._deployment._fields import InSum
from skfedkt._deployment._secure import fixed_point_for
from skfedkt._fedavg._plan import FedAvgPlan
from skfedkt.datasets import load_federated

SMALL_MLP = MLPClassifier(hidden_layer_sizes=(16,), batch_size=32)


def cancer():
    """Breast cancer in five parties, every set scaled by the public set's statistics
    (networks learn slowly from its unscaled features)."""
    data = load_federated("breast_cancer", n_parties=5, random_state=0)
    mean, std = data.X_public.mean(axis=0), data.X_public.std(axis=0)
    for name in ("X_train", "X_public", "X_test"):
        data[name] = (data[name] - mean) / std
    return data


@pytest.fixture(scope="module", params=["breast_cancer", "digits"])
def data(request):
    # digits as the main job loads it
    return cancer() if request.param == "breast_cancer" else load_federated(
        "digits", random_state=0)


def fit_both(clf, data):
    """`clf` fitted on `data` without and with secure aggregation."""
    plain = clone(clf).fit(data.X_train, data.y_train, groups=data.groups,
                           X_unlabeled=data.X_public)
    with skfedkt.config_context(secure_aggregation=True):
        secure = clone(clf).fit(data.X_train, data.y_train, groups=data.groups,
                                X_unlabeled=data.X_public)
    return plain, secure


def recording(monkeypatch, cls, hook):
    """What `cls`'s server `hook` receives, appended call by call: the sums and the
    uploads."""
    seen = []
    original = getattr(cls, hook)

    def record(self, context, uploads, *args):
        seen.append(dict(sums=context.sums, uploads=list(uploads)))
        return original(self, context, uploads, *args)

    monkeypatch.setattr(cls, hook, record)
    return seen


# --- the one-shot ensemble ----------------------------------------------------------------

# digits' parties are skewed by label: an ensemble may say so, with and without sums
@pytest.mark.filterwarnings("ignore::skfedkt.LabelCollapseWarning")
@pytest.mark.parametrize("voting", ["soft", "hard"])
@pytest.mark.parametrize("final", [None, LogisticRegression(max_iter=200)],
                         ids=["tree", "logistic"])
def test_the_oneshot_ensemble_distils_the_plain_paths_model_from_sums(data, voting, final):
    clf = OneShotEnsembleClassifier(DecisionTreeClassifier(max_depth=6), voting=voting,
                                    distill=True, final_estimator=final, random_state=0)
    plain, secure = fit_both(clf, data)
    np.testing.assert_array_equal(secure.predict(data.X_test), plain.predict(data.X_test))
    np.testing.assert_array_equal(secure.predict_proba(data.X_test),
                                  plain.predict_proba(data.X_test))
    # no local model reached the server; every party trained and is in the ensemble
    assert secure.estimators_ == []
    np.testing.assert_array_equal(secure.trained_parties_, plain.trained_parties_)
    np.testing.assert_array_equal(secure.selected_parties_, plain.selected_parties_)


def test_the_oneshot_server_receives_summed_votes_and_counts_alone(monkeypatch):
    data = load_federated("digits", random_state=0)
    seen = recording(monkeypatch, OneShotEnsembleClassifier, "_server_step")
    # party 6 (70 rows) trains nothing: its votes are zeros, its counts still count
    clf = OneShotEnsembleClassifier(DecisionTreeClassifier(max_depth=4), voting="hard",
                                    distill=True, min_samples=100, random_state=0)
    # the warning reads the summed class counts under it: the same training shares
    fitted = []
    for secure in (False, True):
        with skfedkt.config_context(secure_aggregation=secure), pytest.warns(
                LabelCollapseWarning, match="class 8: 10% of the training rows, 0% of the "
                                            "predictions"):
            fitted.append(clone(clf).fit(data.X_train, data.y_train, groups=data.groups,
                                         X_unlabeled=data.X_public))
    plain, secure = fitted
    sums, uploads = seen[1]["sums"], seen[1]["uploads"]
    assert set(sums) == {"votes", "trained", "class_counts"}
    assert int(sums["trained"]) == len(plain.trained_parties_) == 9
    np.testing.assert_array_equal(sums["class_counts"], np.bincount(data.y_train))
    # hard votes are counted exactly: the plain ensemble's mean vote, times its size
    np.testing.assert_array_equal(
        sums["votes"], sum(model.votes(data.X_public, 10, soft=False)
                           for model in plain._ensemble))
    assert all(upload.payload == dict(model=None, codes=None)
               and upload.manifest["class_counts"] is None for upload in uploads)
    np.testing.assert_array_equal(secure.trained_parties_, plain.trained_parties_)
    np.testing.assert_array_equal(secure.predict(data.X_test), plain.predict(data.X_test))


# --- FedAvg, FedProx, FedDF ---------------------------------------------------------------

VARIANTS = {
    "fedavg": dict(),
    "fedprox": dict(proximal_mu=0.1),
    "feddf": dict(distill_epochs=2),
}


def weights_bound(clf, data):
    """The most a round's averaged weight may be off under secure aggregation: the
    stated error of a sum in fixed point, over the rows that divide it, and the
    rounding of either average's float arithmetic."""
    sizes = np.bincount(data.groups)
    plan = FedAvgPlan.of(clf)
    bound = FedAvgClassifier._uploads.channel(plan).float_bound(plan, sizes.max())
    encoding = fixed_point_for(len(sizes), bound)
    return encoding.error_bound(len(sizes)) / sizes.sum(), len(sizes)


def assert_within(secure, plain, bound, n_parties):
    for secure_w, plain_w in zip(secure, plain):
        rounding = 4 * n_parties * np.finfo(float).eps * np.abs(plain_w).max()
        assert np.abs(secure_w - plain_w).max() <= bound + rounding


@pytest.mark.parametrize("variant", VARIANTS)
def test_fedavg_averages_the_plain_paths_weights_from_sums(data, variant):
    clf = FedAvgClassifier(SMALL_MLP, n_rounds=3, local_epochs=2, random_state=0,
                           **VARIANTS[variant])
    plain, secure = fit_both(clf, data)
    assert secure.n_rounds_ == plain.n_rounds_ == 3
    bound, n_parties = weights_bound(clf, data)
    # the first round averages the same parties' weights: within the stated bound
    assert_within(secure._round_weights[0], plain._round_weights[0], bound, n_parties)
    # later rounds start from weights that far apart, which training barely spreads
    for secure_round, plain_round in zip(secure._round_weights[1:], plain._round_weights[1:]):
        assert_within(secure_round, plain_round, 10 * bound, n_parties)
    np.testing.assert_allclose(secure.predict_proba(data.X_test),
                               plain.predict_proba(data.X_test), atol=1e-9)
    np.testing.assert_array_equal(secure.predict(data.X_test), plain.predict(data.X_test))
    np.testing.assert_allclose([entry["train_accuracy"] for entry in secure.history_],
                               [entry["train_accuracy"] for entry in plain.history_],
                               rtol=1e-12)


def test_one_round_of_sgd_is_within_the_bound(data):
    # SGDClassifier's default learning rate starts large, so later rounds would spread
    # any difference in their start, its last digits included: one round here
    clf = FedAvgClassifier(SGDClassifier(loss="log_loss"), n_rounds=1, random_state=0)
    plain, secure = fit_both(clf, data)
    bound, n_parties = weights_bound(clf, data)
    assert_within(secure.estimator_.coef_, plain.estimator_.coef_, bound, n_parties)
    assert_within(secure._round_weights[0], plain._round_weights[0], bound, n_parties)


def test_the_fedavg_server_receives_no_partys_weights(monkeypatch):
    data = load_federated("digits", random_state=0)
    seen = recording(monkeypatch, FedAvgClassifier, "_server_round")
    clf = FedAvgClassifier(SMALL_MLP, n_rounds=2, distill_epochs=1, random_state=0)
    with skfedkt.config_context(secure_aggregation=True):
        clf.fit(data.X_train, data.y_train, groups=data.groups, X_unlabeled=data.X_public)
    for round_ in seen:
        sums = round_["sums"]
        assert set(sums) == {"weighted_0", "weighted_1", "weighted_2", "weighted_3",
                             "rows", "correct", "proba"}
        assert int(sums["rows"]) == len(data.y_train)
        assert sums["proba"].shape == (len(data.X_public), 10)
        assert all(upload.payload == {} for upload in round_["uploads"])


def test_a_one_shot_first_round_runs_on_sums_as_that_algorithm_does():
    data = load_federated("digits", random_state=0)
    init = OneShotEnsembleClassifier(clone(SMALL_MLP).set_params(max_iter=10), distill=True)
    clf = FedAvgClassifier(SMALL_MLP, n_rounds=2, local_epochs=2, proximal_mu=0.1,
                           init=init, random_state=0)
    plain, secure = fit_both(clf, data)
    bound, n_parties = weights_bound(clf, data)
    # the first round's final model learned the same labels: the same weights
    for secure_w, plain_w in zip(secure._round_weights[0], plain._round_weights[0]):
        np.testing.assert_array_equal(secure_w, plain_w)
    assert_within(secure._round_weights[1], plain._round_weights[1], bound, n_parties)
    np.testing.assert_array_equal(secure.predict(data.X_test), plain.predict(data.X_test))


def test_a_party_whose_weights_exceed_the_bound_is_refused_naming_it():
    data = load_federated("breast_cancer", n_parties=5, random_state=0)
    # unscaled features and a large constant step: weights in the millions
    clf = FedAvgClassifier(SGDClassifier(loss="log_loss", learning_rate="constant",
                                         eta0=1e4), n_rounds=1, random_state=0)
    with skfedkt.config_context(secure_aggregation=True), pytest.raises(
            ValueError, match=r"Party 0's trained weights reach .*\(2\*\*20\) only: scale "
                              "the features"):
        clf.fit(data.X_train, data.y_train, groups=data.groups)


class _WithoutSums(OneShotEnsembleClassifier):
    """A one-shot algorithm that declares no fields in the sum."""

    _uploads = replace(OneShotEnsembleClassifier._uploads, fields=tuple(
        field for field in OneShotEnsembleClassifier._uploads.fields
        if not isinstance(field, InSum)))


@pytest.mark.parametrize("make, match", [
    (lambda: OneShotEnsembleClassifier(), "OneShotEnsembleClassifier cannot run under "
     r"secure_aggregation: distill=False \(the ensemble predicts with the parties' "
     r"models\) needs each party's model"),
    (lambda: OneShotEnsembleClassifier(distill=True, selection="cv"),
     r"selection='cv' \(the server ranks each party's model\) needs each party's "
     "model, which secure aggregation keeps at the party; selection='all' runs under it"),
    (lambda: FedAvgClassifier(SMALL_MLP, init=OneShotEnsembleClassifier(
        SMALL_MLP, distill=True, selection="data")),
     r"FedAvgClassifier cannot run under secure_aggregation: its first round, "
     r"init=OneShotEnsembleClassifier\(...\), cannot: selection='data'"),
    (lambda: FedAvgClassifier(SMALL_MLP, init=_WithoutSums(SMALL_MLP, distill=True)),
     r"its first round, init=_WithoutSums\(...\), cannot: it declares no fields in "
     "the sum"),
])
def test_what_needs_more_than_sums_is_refused_before_any_work(make, match, monkeypatch):
    data = cancer()
    monkeypatch.setattr("skfedkt._base.validate_federated_data", None)  # never reached
    with skfedkt.config_context(secure_aggregation=True), pytest.raises(
            ValueError, match=match):
        make().fit(data.X_train, data.y_train, groups=data.groups, X_unlabeled=data.X_public)


def test_the_membership_audit_attacks_the_final_model_alone():
    from skfedkt.privacy import membership_audit

    data = cancer()
    X, y, party = data.X_train, data.y_train, data.groups
    with skfedkt.config_context(secure_aggregation=True):
        clf = OneShotEnsembleClassifier(DecisionTreeClassifier(max_depth=3), distill=True,
                                        random_state=0).fit(
            X[:250], y[:250], groups=party[:250], X_unlabeled=data.X_public)
        audit = membership_audit(clf, X[:250], y[:250], groups=party[:250],
                                 X_unlabeled=data.X_public, X_holdout=X[250:],
                                 y_holdout=y[250:], n_reference=0)
    assert {result.release for result in audit.results} == {"final model"}
