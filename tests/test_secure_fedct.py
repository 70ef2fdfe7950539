"""FedCT under secure aggregation: the server votes on summed label counts alone and
forms the plain path's consensus every round; with ``distill=True`` the final model is
one model, fitted on that consensus, the plain fit's; the parties' vote, which needs
their models, is refused before any work."""

import warnings

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.base import clone
from sklearn.tree import DecisionTreeClassifier

import skfedkt
from skfedkt import FedCTClassifier
from skfedkt._deployment._party_models import mean_accuracy
from skfedkt._fedct._payloads import fedct_message
from skfedkt._fedct._plan import FedCTPlan
from skfedkt._fedct._sums import check_sums, party_sums
from skfedkt.datasets import load_federated
from skfedkt.privacy import BitFlips, TeacherVotes, membership_audit


@pytest.fixture(scope="module", params=["breast_cancer", "digits"])
def data(request):
    # 10 label-skewed parties
    return load_federated(request.param, random_state=0)


def _fit(clf, data, secure):
    with warnings.catch_warnings(), skfedkt.config_context(secure_aggregation=secure):
        warnings.simplefilter("ignore")  # the parties' label skew
        return clone(clf).fit(data.X_train, data.y_train, groups=data.groups,
                              X_unlabeled=data.X_public)


def _recording_rounds(monkeypatch):
    """The consensus of every round's message, and what the server round received."""
    recorded = []
    server_round = FedCTClassifier._server_round

    def recording(self, context, uploads):
        message = server_round(self, context, uploads)
        recorded.append(dict(consensus=fedct_message(message)["consensus"],
                             sums=context.sums, uploads=uploads))
        return message

    monkeypatch.setattr(FedCTClassifier, "_server_round", recording)
    return recorded


def _plain_and_secure(clf, data, monkeypatch):
    """Both fits, and what each server round received."""
    recorded = _recording_rounds(monkeypatch)
    plain = _fit(clf, data, False)
    plain_rounds = list(recorded)
    recorded.clear()
    return plain, plain_rounds, _fit(clf, data, True), recorded


def _assert_same_consensus(plain, plain_rounds, secure, secure_rounds):
    assert secure.n_rounds_ == plain.n_rounds_
    assert len(secure_rounds) == len(plain_rounds)
    for plain_round, secure_round in zip(plain_rounds, secure_rounds):
        assert_array_equal(secure_round["consensus"], plain_round["consensus"])
    assert ([entry["consensus_changed"] for entry in secure.history_]
            == [entry["consensus_changed"] for entry in plain.history_])
    # the mean accuracy from the sum's fixed point
    assert_allclose([entry["train_accuracy"] for entry in secure.history_],
                    [entry["train_accuracy"] for entry in plain.history_], atol=1e-8)
    assert_array_equal(secure.consensus_mask_, plain.consensus_mask_)
    assert_array_equal(secure.consensus_labels_, plain.consensus_labels_)


def test_the_consensus_of_every_round_is_the_plain_paths(data, monkeypatch):
    clf = FedCTClassifier(DecisionTreeClassifier(max_depth=5), n_rounds=6, distill=True,
                          random_state=0)
    plain, plain_rounds, secure, secure_rounds = _plain_and_secure(clf, data, monkeypatch)
    _assert_same_consensus(plain, plain_rounds, secure, secure_rounds)
    assert secure.epsilon_ == np.inf and secure.privacy_report_ is None


def test_the_server_sees_sums_and_no_party_label_nor_model(data, monkeypatch):
    recorded = _recording_rounds(monkeypatch)
    final = {}
    server_step = FedCTClassifier._server_step

    def recording(self, context, uploads):
        final.update(sums=context.sums, uploads=uploads)
        return server_step(self, context, uploads)

    monkeypatch.setattr(FedCTClassifier, "_server_step", recording)
    clf = _fit(FedCTClassifier(DecisionTreeClassifier(max_depth=5), n_rounds=4,
                               distill=True, random_state=0), data, True)
    n_parties, n_public = len(clf.parties_), len(clf.consensus_mask_)
    for seen in [*recorded, final]:
        for upload in seen["uploads"]:
            assert upload.payload == {"model": None, "codes": None}
            assert "training_accuracy" not in upload.manifest
    for seen in recorded:
        assert set(seen["sums"]) == {"label_counts", "training_accuracy"}
        assert seen["sums"]["label_counts"].shape == (n_public, len(clf.classes_))
        # without bit flips every party votes on every public row
        assert_array_equal(seen["sums"]["label_counts"].sum(axis=1), n_parties)
    assert set(final["sums"]) == {"training_accuracy"}
    # the final model learned the last consensus, on the public rows; no party's
    # model reached the server
    assert clf.estimators_ == []
    assert clf.final_estimator_.tree_.n_node_samples[0] == clf.consensus_mask_.sum()
    assert (clf.upload_bytes_ > recorded[0]["sums"]["label_counts"].nbytes).all()


@pytest.mark.parametrize("privacy", [
    BitFlips(10.0, sensitivity=10), TeacherVotes(30.0, n_teachers=5, n_queries=50)],
    ids=["bit flips", "teacher votes"])
def test_privacy_gives_the_plain_paths_consensus_and_guarantee(privacy, data, monkeypatch):
    clf = FedCTClassifier(DecisionTreeClassifier(max_depth=5), n_rounds=3, privacy=privacy,
                          distill=True, random_state=0)
    plain, plain_rounds, secure, secure_rounds = _plain_and_secure(clf, data, monkeypatch)
    _assert_same_consensus(plain, plain_rounds, secure, secure_rounds)
    assert secure.epsilon_ == plain.epsilon_ < np.inf
    assert secure.privacy_report_ == plain.privacy_report_
    summed = "label_counts" if isinstance(privacy, BitFlips) else "vote_counts"
    assert summed in secure_rounds[0]["sums"]


def test_a_party_clips_its_noisy_vote_counts_to_the_servers_bound():
    plan = FedCTPlan.of(FedCTClassifier(privacy=TeacherVotes(1.0, n_teachers=5)))
    counts = np.array([[3.0, 1e9], [-1e9, 2.0]])
    sums = party_sums(plan, counts, 0.9, n_classes=2)
    bound = plan.vote_bound(2)
    assert_array_equal(sums["vote_counts"], [[3.0, bound], [-bound, 2.0]])
    assert sums["training_accuracy"].tolist() == [0.9]


@pytest.mark.parametrize("secure", [False, True])
def test_no_consensus_leaves_the_final_model_nothing_to_learn(secure):
    data = load_federated("digits", random_state=0)
    clf = FedCTClassifier(DecisionTreeClassifier(max_depth=5), n_rounds=2,
                          privacy=TeacherVotes(8.0, n_teachers=3, n_queries=100),
                          distill=True, random_state=0)
    with pytest.raises(ValueError, match="No public row has a consensus label"):
        _fit(clf, data, secure)


@pytest.mark.parametrize("make, match", [
    (lambda: FedCTClassifier(), r"FedCTClassifier cannot run under secure_aggregation: "
     r"distill=False \(the parties' vote\) needs each party's model, which secure "
     "aggregation keeps at the party; distill=True runs under it"),
    (lambda: FedCTClassifier(n_rounds=0, distill=True), "n_rounds=0 makes none"),
    (lambda: FedCTClassifier([DecisionTreeClassifier()] * 10, distill=True),
     "needs the final model's kind: pass final_estimator"),
    (lambda: FedCTClassifier(dict.fromkeys(range(10), DecisionTreeClassifier()),
                             distill=True), "pass final_estimator"),
])
def test_what_needs_more_than_sums_is_refused_before_any_work(make, match, monkeypatch):
    data = load_federated("breast_cancer", random_state=0)
    monkeypatch.setattr("skfedkt._base.validate_federated_data", None)  # never reached
    with pytest.raises(ValueError, match=match):
        _fit(make(), data, True)


def test_the_coordinator_refuses_sums_no_honest_parties_send():
    counts = np.array([[2, 1], [0, 3]])
    check_sums(dict(label_counts=counts, training_accuracy=np.array([2.5])), 3)
    with pytest.raises(ValueError, match="row 1 holds \\[1, 3\\]"):
        check_sums(dict(label_counts=np.array([[2, 1], [1, 3]]),
                        training_accuracy=np.array([2.5])), 3)
    # a negative count moves a vote, though the row's total looks honest
    with pytest.raises(ValueError, match="row 0 holds \\[-1, 3\\]. A party sent counts"):
        check_sums(dict(label_counts=np.array([[-1, 3], [0, 3]]),
                        training_accuracy=np.array([2.5])), 3)
    with pytest.raises(ValueError, match="summed training accuracy of 3 parties is 4"):
        mean_accuracy(dict(training_accuracy=np.array([4.0])), 3)


def test_the_final_model_predicts_and_alone_is_audited(data):
    clf = FedCTClassifier(DecisionTreeClassifier(max_depth=8), n_rounds=4, distill=True,
                          random_state=0)
    secure = _fit(clf, data, True)
    proba = secure.predict_proba(data.X_test)
    assert_allclose(proba.sum(axis=1), 1.0)
    assert_array_equal(secure.predict(data.X_test), secure.classes_[proba.argmax(axis=1)])
    # one tree on the consensus of a small public set (71 rows of breast_cancer, 225
    # of digits' ten classes)
    assert secure.score(data.X_test, data.y_test) > (0.85 if len(secure.classes_) == 2
                                                     else 0.6)
    with skfedkt.config_context(secure_aggregation=True):
        audit = membership_audit(secure, data.X_train, data.y_train, groups=data.groups,
                                 X_unlabeled=data.X_public, X_holdout=data.X_test,
                                 y_holdout=data.y_test, n_reference=0)
    assert {result.release for result in audit.results} == {"final model"}
