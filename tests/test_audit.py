"""The membership audit: it catches a leaky release, reads 0.5 for one that holds nothing,
and names every release of every estimator next to the epsilon that covers it."""

import numpy as np
import pytest
from numpy.testing import assert_allclose
from sklearn.datasets import load_breast_cancer, make_classification
from sklearn.dummy import DummyClassifier
from sklearn.metrics import auc
from sklearn.neighbors import KNeighborsClassifier
from sklearn.neural_network import MLPClassifier
from sklearn.preprocessing import scale
from sklearn.tree import DecisionTreeClassifier

from skfedkt import (
    FedAvgClassifier,
    FedCTClassifier,
    FedKTClassifier,
    OneShotEnsembleClassifier,
    config_context,
)
from skfedkt.privacy import (
    PartyNoise,
    ServerNoise,
    dp_auc_bound,
    membership_audit,
    party_membership_audit,
)


@pytest.fixture(scope="module")
def noisy_labels():
    """Rows with 30% flipped labels, where memorising shows: train, party, holdout."""
    X, y = make_classification(900, n_features=8, flip_y=0.3, random_state=0)
    return X[:300], y[:300], np.arange(300) % 3, X[300:], y[300:]


def audit_of(estimator, data, **options):
    X, y, party, X_holdout, y_holdout = data
    estimator.fit(X, y, groups=party)
    return membership_audit(estimator, X, y, groups=party, X_holdout=X_holdout,
                            y_holdout=y_holdout, random_state=0, **options)


def test_a_nearest_neighbour_upload_is_caught(noisy_labels):
    audit = audit_of(OneShotEnsembleClassifier(KNeighborsClassifier(1), selection="all"),
                     noisy_labels, n_reference=2)
    # a 1-NN upload answers every member with its own label: with 30% noise, only about
    # two thirds of the non-members get theirs
    for attack in ("loss", "lira"):
        assert audit.auc("upload", attack) > 0.62
    rows = {(r["release"], r["attack"]): r for r in audit.summary()}
    assert rows["upload", "loss"]["n_parties"] == 3
    assert rows["upload", "loss"]["auc_max"] >= rows["upload", "loss"]["auc"]


def test_a_constant_upload_reads_as_a_guess(noisy_labels):
    audit = audit_of(OneShotEnsembleClassifier(DummyClassifier(), selection="all"),
                     noisy_labels, n_reference=2)
    for result in audit.results:
        assert result.auc == pytest.approx(0.5)
        assert result.tpr_at_1pct_fpr == 0


def test_members_and_nonmembers_are_matched_by_class(noisy_labels):
    """A skewed party's members against non-members of every class would measure the
    skew, not membership: each class gives as many non-members as members."""
    X, y, _, X_holdout, y_holdout = noisy_labels
    party = np.where(y == 1, np.arange(300) % 2, 2)  # party 2 holds class 0 only
    clf = OneShotEnsembleClassifier(DummyClassifier(), selection="all").fit(X, y, groups=party)
    audit = membership_audit(clf, X, y, groups=party, X_holdout=X_holdout,
                             y_holdout=y_holdout, n_reference=0, random_state=0)
    # a constant model gives every row of a class the same score: any imbalance between
    # the classes of members and non-members would move the AUC off 0.5
    assert all(r.auc == pytest.approx(0.5) for r in audit.results)
    assert {r.party: r.n_members for r in audit.results if r.release == "upload"} == {
        p: r.n_nonmembers for r in audit.results if r.release == "upload" for p in [r.party]
    }


def test_every_release_of_every_estimator_is_attacked():
    X, y = load_breast_cancer(return_X_y=True)
    X = scale(X)  # as a network needs
    party = np.arange(240) % 3
    data = X[:240], y[:240], party, X[300:], y[300:]
    public = X[240:300]
    expected = {
        FedKTClassifier(n_students=2, random_state=0): {"upload", "final model"},
        FedCTClassifier(n_rounds=1, random_state=0): {"labels", "local model", "final model"},
        OneShotEnsembleClassifier(random_state=0): {"upload", "final model"},
        # each party's weights of the last round, which the server saw
        FedAvgClassifier(MLPClassifier((8,)), n_rounds=2, random_state=0): {
            "upload", "final model"},
    }
    for estimator, releases in expected.items():
        estimator.fit(*data[:2], groups=party, X_unlabeled=public)
        audit = membership_audit(estimator, *data[:2], groups=party, X_unlabeled=public,
                                 X_holdout=data[3], y_holdout=data[4], n_reference=1,
                                 random_state=0)
        attacked = {(r.release, r.party, r.attack) for r in audit.results}
        assert attacked == {(release, p, attack) for release in releases for p in range(3)
                            for attack in ("loss", "lira")}
        assert all(0 <= r.auc <= 1 for r in audit.results)
        assert "release" in str(audit) and "final model" in str(audit)


def test_fedavg_releases_party_weights_only_where_the_server_saw_them(noisy_labels):
    """The server sees each party's weights of the last round in the clear only in
    `fit` without secure aggregation, and only when that round averaged weights."""
    X, y, party, *_ = noisy_labels
    net = MLPClassifier((8,), max_iter=5)

    def party_releases(clf):
        return {r.party for r in clf._releases.of_fit(clf) if r.name == "upload"}

    assert party_releases(FedAvgClassifier(net, n_rounds=2, random_state=0).fit(
        X, y, groups=party)) == {0, 1, 2}
    with config_context(secure_aggregation=True):
        secure = FedAvgClassifier(net, n_rounds=2, random_state=0).fit(X, y, groups=party)
    assert party_releases(secure) == set()
    first_round_only = FedAvgClassifier(net, n_rounds=1, init=FedKTClassifier(
        net, n_students=1), random_state=0).fit(X, y, groups=party, X_unlabeled=X[:50])
    assert party_releases(first_round_only) == set()


def test_each_release_carries_the_epsilon_that_covers_it():
    X, y = load_breast_cancer(return_X_y=True)
    party = np.arange(300) % 3
    common = dict(groups=party, X_unlabeled=X[300:400])
    holdout = dict(X_holdout=X[400:], y_holdout=y[400:], n_reference=0, random_state=0)
    l2 = FedKTClassifier(privacy=PartyNoise(gamma=0.5, query_fraction=0.2), random_state=0)
    l2.fit(X[:300], y[:300], **common)
    audit = membership_audit(l2, X[:300], y[:300], **common, **holdout)
    for r in audit.results:
        expected = (l2.privacy_report_.party_epsilons[r.party] if r.release == "upload"
                    else l2.epsilon_)
        assert r.epsilon == pytest.approx(expected) and r.delta == 1e-5
    l1 = FedKTClassifier(privacy=ServerNoise(gamma=0.5, query_fraction=0.2), random_state=0)
    l1.fit(X[:300], y[:300], **common)
    audit = membership_audit(l1, X[:300], y[:300], **common, **holdout)
    epsilons = {r.release: r.epsilon for r in audit.results}
    # L1 noise protects the server's labels, not what the parties upload
    assert epsilons == {"upload": np.inf, "final model": pytest.approx(l1.epsilon_)}


@pytest.mark.parametrize("epsilon, delta", [(0.0, 0.0), (0.5, 0.0), (1.0, 1e-5), (3.0, 0.1)])
def test_the_auc_bound_is_the_area_under_the_dp_trade_off_curve(epsilon, delta):
    fpr = np.linspace(0, 1, 200001)
    tpr = np.minimum.reduce([np.ones_like(fpr), np.exp(epsilon) * fpr + delta,
                             1 - np.exp(-epsilon) * (1 - delta - fpr)])
    assert dp_auc_bound(epsilon, delta) == pytest.approx(auc(fpr, tpr), abs=1e-6)


def test_the_auc_bound_grows_with_delta_and_ends_at_one():
    assert dp_auc_bound(1.0, 0.1) > dp_auc_bound(1.0)
    assert dp_auc_bound(np.inf) == 1.0
    assert dp_auc_bound(40.0) == pytest.approx(1.0)


def test_the_same_seed_gives_the_same_audit(noisy_labels):
    estimator = OneShotEnsembleClassifier(DecisionTreeClassifier(max_depth=3), random_state=0)
    first, second = (audit_of(estimator, noisy_labels, n_reference=2) for _ in range(2))
    assert_allclose([r.auc for r in first.results], [r.auc for r in second.results])


def test_without_references_only_the_loss_attack_runs(noisy_labels):
    audit = audit_of(OneShotEnsembleClassifier(random_state=0), noisy_labels, n_reference=0)
    assert {r.attack for r in audit.results} == {"loss"}
    assert np.isnan(audit.auc("upload", "lira"))


def test_a_party_audits_its_upload_before_sending_it(noisy_labels):
    X, y, _, X_holdout, y_holdout = noisy_labels
    public = X_holdout[:100]
    rest = dict(X_holdout=X_holdout[100:], y_holdout=y_holdout[100:], n_reference=2,
                random_state=0)
    leaky = FedKTClassifier(KNeighborsClassifier(1), student_data="party+public",
                            random_state=0)
    audit = party_membership_audit(leaky, X[:200], y[:200], party="h0", classes=[0, 1],
                                   X_unlabeled=public, **rest)
    assert {r.release for r in audit.results} == {"upload"}
    assert audit.auc("upload", "loss") > 0.62  # its students learned its own rows
    upload = leaky.fit_party(X[:200], y[:200], party="h0", classes=[0, 1],
                             X_unlabeled=public)
    from_file = party_membership_audit(leaky, X[:200], y[:200], party="h0", classes=[0, 1],
                                       X_unlabeled=public, upload=upload, **rest)
    assert from_file.auc("upload", "loss") > 0.62
    with pytest.raises(ValueError, match="party 'h0''s, not 'h1''s"):
        party_membership_audit(leaky, X[:200], y[:200], party="h1", classes=[0, 1],
                               X_unlabeled=public, upload=upload, **rest)


def test_a_party_audits_its_private_upload_with_its_guarantee(noisy_labels):
    X, y, _, X_holdout, y_holdout = noisy_labels
    l2 = FedKTClassifier(DecisionTreeClassifier(max_depth=3), n_students=1,
                         privacy=PartyNoise(gamma=0.04, delta=1e-6), random_state=0)
    audit = party_membership_audit(l2, X[:200], y[:200], party="h0", classes=[0, 1],
                                   X_unlabeled=X_holdout[:100], X_holdout=X_holdout[100:],
                                   y_holdout=y_holdout[100:], n_reference=0, random_state=0)
    (result,) = {(r.epsilon, r.delta) for r in audit.results}
    assert np.isfinite(result[0]) and result[1] == 1e-6


def test_audit_errors_name_the_argument(noisy_labels):
    X, y, party, X_holdout, y_holdout = noisy_labels
    clf = OneShotEnsembleClassifier(random_state=0).fit(X, y, groups=party)
    holdout = dict(X_holdout=X_holdout, y_holdout=y_holdout)
    with pytest.raises(TypeError, match="skfedkt's federated estimators"):
        membership_audit(DecisionTreeClassifier().fit(X, y), X, y, **holdout)
    with pytest.raises(ValueError, match="groups does not name the parties"):
        membership_audit(clf, X, y, groups=party + 1, **holdout)
    with pytest.raises(ValueError, match="y_holdout holds labels the estimator was not"):
        membership_audit(clf, X, y, groups=party, X_holdout=X_holdout,
                         y_holdout=y_holdout + 5)
    with pytest.raises(ValueError, match="parties names unknown parties"):
        membership_audit(clf, X, y, groups=party, parties=[7], **holdout)
    skewed = np.where(y == 1, 0, 1)  # party 1 holds class 0 only
    clf.fit(X, y, groups=skewed)
    with pytest.raises(ValueError, match="No held-out row shares a class with party 1"):
        membership_audit(clf, X, y, groups=skewed, X_holdout=X_holdout[y_holdout == 1],
                         y_holdout=y_holdout[y_holdout == 1])


def test_releases_named_twice_are_refused_before_any_attack():
    from skfedkt._audit import _keyed
    from skfedkt.algorithm import Release

    twice = [Release("upload", "a", "proba", predict=len),
             Release("upload", "a", "labels", predict=len)]
    with pytest.raises(ValueError, match="Two releases are named 'upload' of party 'a'"):
        _keyed(twice)
    assert set(_keyed(twice[:1])) == {("upload", "a")}
