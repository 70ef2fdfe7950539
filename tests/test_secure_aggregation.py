"""Secure aggregation in fit: the server step receives sums alone, and FedKT's model is
the plain path's; what needs more than sums is refused before any work."""

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.datasets import load_breast_cancer, load_digits
from sklearn.ensemble import RandomForestClassifier
from sklearn.tree import DecisionTreeClassifier

import skfedkt
from skfedkt import FedKTClassifier, SoftVotes
from skfedkt.datasets import load_federated
from skfedkt.privacy import PartyNoise


def _split(loader, skew):
    X, y = loader(return_X_y=True)
    order = np.random.RandomState(0).permutation(len(y))
    X, y = X[order], y[order]
    n, n_public = int(len(y) * 0.6), int(len(y) * 0.2)
    party = np.arange(n) % 5
    # a share `skew` of the rows by class, the others at random
    party = np.where(np.random.RandomState(1).rand(n) < skew, y[:n] % 5, party)
    return X[:n], y[:n], party, X[n:n + n_public], X[n + n_public:]


def _main_job():
    """The main job's data (``python -m skfedkt``): digits in 10 label-skewed parties."""
    data = load_federated("digits", random_state=0)
    return data.X_train, data.y_train, data.groups, data.X_public, data.X_test


@pytest.mark.parametrize("voting", ["soft", "hard", SoftVotes(pooling="sum")],
                         ids=["prior-corrected", "hard", "sum"])
@pytest.mark.parametrize("split", [
    lambda: _split(load_breast_cancer, 0.0), lambda: _split(load_digits, 0.5),
    # two parties hold most rows: the server's bound caps the larger, which under secure
    # aggregation the party applies itself
    lambda: _split(load_breast_cancer, 0.8), _main_job],
    ids=["cancer", "digits", "cancer-capped", "main-job"])
def test_fedkt_learns_the_plain_paths_labels_from_sums(voting, split):
    X, y, party, X_public, X_test = split()
    clf = FedKTClassifier(RandomForestClassifier(n_estimators=10), voting=voting,
                          n_students=2, n_teachers=3, random_state=0)
    plain = clone(clf).fit(X, y, groups=party, X_unlabeled=X_public)
    with skfedkt.config_context(secure_aggregation=True):
        secure = clone(clf).fit(X, y, groups=party, X_unlabeled=X_public)
    np.testing.assert_array_equal(secure.public_labels_, plain.public_labels_)
    np.testing.assert_array_equal(secure.predict(X_test), plain.predict(X_test))
    if voting == "hard":  # counts are summed exactly
        np.testing.assert_array_equal(secure.vote_counts_, plain.vote_counts_)
    # no student reached the server, nor any party's class mix
    assert all(students == [] for students in secure.students_)
    assert np.isnan(secure.class_shares_["parties"]).all()
    np.testing.assert_allclose(secure.class_shares_["training"],
                               plain.class_shares_["training"])


def test_the_server_step_receives_no_party_terms(monkeypatch):
    X, y, party, X_public, _ = _split(load_breast_cancer, 0.0)
    seen = {}
    server_step = FedKTClassifier._server_step

    def recording(self, context, uploads):
        seen.update(sums=context.sums, payloads=[upload.payload for upload in uploads])
        return server_step(self, context, uploads)

    monkeypatch.setattr(FedKTClassifier, "_server_step", recording)
    with skfedkt.config_context(secure_aggregation=True):
        clf = FedKTClassifier(DecisionTreeClassifier(max_depth=3), voting="hard",
                              n_students=2, n_teachers=3, random_state=0).fit(
            X, y, groups=party, X_unlabeled=X_public)
    assert all(set(payload) == {"students", "codes"} and payload["students"] == []
               for payload in seen["payloads"])
    assert set(seen["sums"]) == {"votes", "consistent", "class_counts"}
    np.testing.assert_array_equal(seen["sums"]["class_counts"], np.bincount(y))
    # what a party sent: its keys, sealed shares, masked words and unmasking shares
    assert (clf.upload_bytes_ > seen["sums"]["votes"].nbytes).all()


@pytest.mark.parametrize("make, match", [
    (lambda: FedKTClassifier(distill=False), r"distill=False \(the students' vote\) needs "
     "each party's students, which secure aggregation keeps at the party; distill=True "
     "runs under it"),
])
def test_what_needs_more_than_sums_is_refused_before_any_work(make, match, monkeypatch):
    X, y, party, X_public, _ = _split(load_breast_cancer, 0.0)
    monkeypatch.setattr("skfedkt._base.validate_federated_data", None)  # never reached
    with skfedkt.config_context(secure_aggregation=True), pytest.raises(ValueError,
                                                                         match=match):
        make().fit(X, y, groups=party, X_unlabeled=X_public)


def test_two_parties_and_a_deployed_step_without_its_session_are_refused():
    X, y, party, X_public, _ = _split(load_breast_cancer, 0.0)
    clf = FedKTClassifier(DecisionTreeClassifier(max_depth=3), voting="hard")
    with skfedkt.config_context(secure_aggregation=True):
        with pytest.raises(ValueError, match="needs at least 3 parties, got 2"):
            clf.fit(X, y, groups=party % 2, X_unlabeled=X_public)
        with pytest.raises(TypeError, match="pass the consortium's secure_session"):
            clf.fit_party(X, y, party="a", classes=[0, 1], X_unlabeled=X_public)


def test_the_switch_is_a_boolean_of_the_threads_configuration():
    assert skfedkt.get_config()["secure_aggregation"] is False
    with pytest.raises(TypeError, match="secure_aggregation must be True, False"):
        skfedkt.set_config(secure_aggregation="yes")
    with skfedkt.config_context(secure_aggregation=True):
        assert skfedkt.get_config()["secure_aggregation"] is True
    assert skfedkt.get_config()["secure_aggregation"] is False


def test_bounding_party_counts_leaves_the_callers_counts_alone():
    from skfedkt._engine._voting import bounded_party_counts

    totals = np.array([[108.0], [175.0], [20.0], [13.0], [25.0]])
    bounded, capped = bounded_party_counts(totals)
    assert capped.tolist() == [1] and bounded[1, 0] == 166 and totals[1, 0] == 175


def test_the_environment_turns_it_on_for_workers_another_library_starts():
    import os
    import subprocess
    import sys

    printed = subprocess.run(
        [sys.executable, "-c", "import skfedkt; print(skfedkt.get_config())"],
        env=dict(os.environ, SKFEDKT_SECURE_AGGREGATION="1"), capture_output=True,
        text=True, check=True).stdout
    assert printed.strip() == "{'stack_networks': True, 'secure_aggregation': True}"


def test_the_membership_audit_attacks_the_final_model_alone():
    from skfedkt.privacy import membership_audit

    X, y, party, X_public, _ = _split(load_breast_cancer, 0.0)
    with skfedkt.config_context(secure_aggregation=True):
        clf = FedKTClassifier(DecisionTreeClassifier(max_depth=3), voting="hard",
                              n_students=2, n_teachers=3, random_state=0).fit(
            X[:200], y[:200], groups=party[:200], X_unlabeled=X_public)
        audit = membership_audit(clf, X[:200], y[:200], groups=party[:200],
                                 X_unlabeled=X_public, X_holdout=X[200:300],
                                 y_holdout=y[200:300], n_reference=0)
    assert {result.release for result in audit.results} == {"final model"}


@pytest.mark.parametrize("voting", ["soft", "hard"])
def test_fedkt_l2_sums_the_parties_private_students_votes(voting):
    """At L2 every student is private already: their summed votes, and the parties'
    noisy class counts, give the plain path's public labels and epsilon."""
    X, y, party, X_public, _ = _split(load_digits, 0.5)
    clf = FedKTClassifier(DecisionTreeClassifier(max_depth=6), voting=voting,
                          privacy=PartyNoise(gamma=0.5), random_state=0)
    plain = clone(clf).fit(X, y, groups=party, X_unlabeled=X_public)
    with skfedkt.config_context(secure_aggregation=True):
        secure = clone(clf).fit(X, y, groups=party, X_unlabeled=X_public)
    np.testing.assert_array_equal(secure.public_labels_, plain.public_labels_)
    assert secure.epsilon_ == plain.epsilon_
