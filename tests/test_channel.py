"""One channel: every algorithm's party step sends what the server sums in the sum, with
secure aggregation on or off; the server steps read the total alone, so the secure fit
gives the plain fit's model, or is refused before any training, naming the parameter
setting that runs under it. Each field is declared once, and that declaration drives the
party's writer and the server's checks."""

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.datasets import load_breast_cancer
from sklearn.linear_model import LogisticRegression, Ridge
from sklearn.neural_network import MLPClassifier
from sklearn.preprocessing import StandardScaler
from sklearn.tree import DecisionTreeClassifier

import skfedkt
from skfedkt import (
    DSFLClassifier,
    FedAvgClassifier,
    FedCTClassifier,
    FedKTClassifier,
    HardVotes,
    OneShotEnsembleClassifier,
    SoftVotes,
    UploadError,
)
from skfedkt.privacy import (
    BitFlips,
    DistributedNoise,
    PartyNoise,
    ServerNoise,
    TeacherVotes,
)


@pytest.fixture(scope="module")
def data():
    X, y = load_breast_cancer(return_X_y=True)
    X = StandardScaler().fit_transform(X)
    order = np.random.RandomState(0).permutation(len(y))
    X, y = X[order], y[order]
    party = np.arange(300) % 5
    # a share of the rows by class: label skew, and parties of unequal sizes
    party = np.where(np.random.RandomState(1).rand(300) < 0.5, y[:300] * 2, party)
    return X[:300], y[:300], party, X[300:420], X[420:]


def _tree():
    return DecisionTreeClassifier(max_depth=3)


SAME_MODEL = {
    "fedkt default": FedKTClassifier(_tree()),
    "fedkt hard": FedKTClassifier(_tree(), voting="hard"),
    "fedkt every student votes": FedKTClassifier(_tree(),
                                                 voting=HardVotes(consistent=False)),
    "fedkt summed votes": FedKTClassifier(_tree(), voting=SoftVotes(pooling="sum")),
    "fedkt soft labels": FedKTClassifier(_tree(), soft_labels="all"),
    "fedkt students learn party rows": FedKTClassifier(_tree(), student_data="party+public"),
    "fedkt one partition": FedKTClassifier(_tree(), n_students=1),
    "fedkt unmatched shares": FedKTClassifier(_tree(), voting=SoftVotes(match_shares=False)),
    "fedkt logistic final": FedKTClassifier(_tree(),
                                            final_estimator=LogisticRegression(max_iter=500)),
    "fedkt L1": FedKTClassifier(_tree(), privacy=ServerNoise(gamma=0.5)),
    "fedkt L1 gaussian": FedKTClassifier(_tree(), privacy=ServerNoise(gamma=0.5,
                                                                      noise="gaussian")),
    "fedkt L2": FedKTClassifier(_tree(), privacy=PartyNoise(gamma=0.5)),
    "fedkt L2 hard": FedKTClassifier(_tree(), voting="hard", privacy=PartyNoise(gamma=0.5)),
    "fedct distilled": FedCTClassifier(_tree(), n_rounds=3, distill=True),
    "fedct distilled, bit flips": FedCTClassifier(_tree(), n_rounds=3, distill=True,
                                                  privacy=BitFlips(4.0)),
    "fedct distilled, teacher votes": FedCTClassifier(
        _tree(), n_rounds=2, distill=True, privacy=TeacherVotes(4.0, n_teachers=3, n_queries=50)),
    "fedct distilled into another model": FedCTClassifier(
        [_tree(), _tree(), _tree(), _tree(), _tree()], n_rounds=2, distill=True,
        final_estimator=DecisionTreeClassifier(max_depth=5)),
    "dsfl distilled": DSFLClassifier(_tree(), n_rounds=3, distill=True),
    "dsfl distilled, sharpened": DSFLClassifier(_tree(), n_rounds=2, distill=True,
                                                temperature=0.5),
    "oneshot distilled": OneShotEnsembleClassifier(_tree(), distill=True),
    "oneshot distilled, hard": OneShotEnsembleClassifier(_tree(), distill=True,
                                                         voting="hard"),
    "oneshot distilled into a regressor": OneShotEnsembleClassifier(
        _tree(), distill=True, final_estimator=Ridge()),
    "oneshot, a party too small to train": OneShotEnsembleClassifier(
        _tree(), distill=True, min_samples=50),
    "fedavg": FedAvgClassifier(MLPClassifier((8,)), n_rounds=2),
    "fedprox": FedAvgClassifier(MLPClassifier((8,)), n_rounds=2, proximal_mu=0.1),
    "feddf": FedAvgClassifier(MLPClassifier((8,)), n_rounds=2, distill_epochs=1),
    "fedkt-prox": FedAvgClassifier(MLPClassifier((8,)), n_rounds=2,
                                   init=FedKTClassifier(MLPClassifier((8,)))),
}


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("name", SAME_MODEL)
def test_secure_aggregation_gives_the_plain_fits_model(data, name):
    X, y, party, X_public, X_test = data
    clf = clone(SAME_MODEL[name]).set_params(random_state=0)
    plain = clone(clf).fit(X, y, groups=party, X_unlabeled=X_public)
    with skfedkt.config_context(secure_aggregation=True):
        secure = clone(clf).fit(X, y, groups=party, X_unlabeled=X_public)
    # the fixed point of floats in the secure sum is off by at most n / 2**33 each
    method = "predict_proba" if hasattr(plain, "predict_proba") else "decision_function"
    np.testing.assert_allclose(getattr(secure, method)(X_test),
                               getattr(plain, method)(X_test), atol=1e-6)
    np.testing.assert_array_equal(secure.predict(X_test), plain.predict(X_test))
    # a data-dependent epsilon reads the votes, which the fixed point moves by as little
    assert getattr(secure, "epsilon_", 0) == pytest.approx(getattr(plain, "epsilon_", 0),
                                                           rel=1e-6)


REFUSED = [
    (FedKTClassifier(distill=False), "distill=False .* needs each party's students, "
     "which secure aggregation keeps at the party; distill=True runs under it"),
    (FedCTClassifier(), r"distill=False \(the parties' vote\) needs each party's model, "
     ".*; distill=True runs under it"),
    (DSFLClassifier(), r"distill=False \(the parties' vote\) needs each party's model, "
     ".*; distill=True runs under it"),
    (OneShotEnsembleClassifier(), r"distill=False .* needs each party's model, .*; "
     "distill=True with selection='all' runs under it"),
    (OneShotEnsembleClassifier(distill=True, selection="cv"), "selection='cv' .* needs "
     "each party's model, .*; selection='all' runs under it"),
    (FedAvgClassifier(MLPClassifier(), init=OneShotEnsembleClassifier(
        MLPClassifier(), distill=True, selection="cv")),
     r"its first round, init=OneShotEnsembleClassifier\(...\), cannot: selection='cv'"),
]


@pytest.mark.parametrize("clf, match", REFUSED)
def test_a_setting_that_needs_a_party_alone_is_refused_before_any_work(
        data, clf, match, monkeypatch):
    X, y, party, X_public, _ = data
    monkeypatch.setattr("skfedkt._base.validate_federated_data", None)  # never reached
    with skfedkt.config_context(secure_aggregation=True), pytest.raises(
            ValueError, match=f"cannot run under secure_aggregation: {match}"):
        clf.fit(X, y, groups=party, X_unlabeled=X_public)


def test_noise_in_shares_needs_the_secure_sum(data, monkeypatch):
    X, y, party, X_public, _ = data
    monkeypatch.setattr("skfedkt._base.validate_federated_data", None)  # never reached
    with pytest.raises(ValueError, match="cannot run without secure_aggregation: "
                       "DistributedNoise is added by the parties in shares of a secure "
                       "sum, which is off; pass ServerNoise"):
        FedKTClassifier(privacy=DistributedNoise()).fit(X, y, groups=party,
                                                         X_unlabeled=X_public)


def test_fedct_distills_the_last_consensus_in_either_mode(data):
    X, y, party, X_public, X_test = data
    fitted = FedCTClassifier(_tree(), n_rounds=2, distill=True, random_state=0).fit(
        X, y, groups=party, X_unlabeled=X_public)
    # the parties' models crossed in the clear, the final model learned the consensus
    assert len(fitted.estimators_) == 5
    labels = fitted.classes_[fitted.final_estimator_.predict(X_public[
        fitted.consensus_mask_])]
    assert np.mean(labels == fitted.consensus_labels_) > 0.9
    with pytest.raises(ValueError, match="n_rounds=0 makes none"):
        FedCTClassifier(n_rounds=0, distill=True).fit(X, y, groups=party,
                                                      X_unlabeled=X_public)
    with pytest.raises(ValueError, match="needs the final model's kind: pass "
                       "final_estimator"):
        FedCTClassifier([_tree()] * 5, distill=True).fit(X, y, groups=party,
                                                         X_unlabeled=X_public)


def _uploads(clf, data, **steps):
    X, y, party, X_public, _ = data
    return [clf.fit_party(X[party == p], y[party == p], party=int(p), classes=[0, 1],
                          X_unlabeled=X_public, **steps) for p in np.unique(party)]


def test_a_party_refuses_to_send_a_sum_that_is_not_what_it_declares(data, monkeypatch):
    import skfedkt._fedkt._sums as sums

    true_counts = sums.hard_vote_counts

    def inflated(*args, **kwargs):
        every, consistent = true_counts(*args, **kwargs)
        return every * 3, consistent

    monkeypatch.setattr(sums, "hard_vote_counts", inflated)
    with pytest.raises(ValueError, match="Party 0 refuses to send its sum 'votes': a "
                       "value of magnitude .* beyond the bound 2"):
        _uploads(FedKTClassifier(_tree(), voting="hard", random_state=0), data)


def test_the_plain_server_checks_every_partys_sums_naming_party_and_field(data):
    X_public = data[3]
    clf = FedKTClassifier(_tree(), voting="hard", random_state=0)
    uploads = _uploads(clf, data)
    votes = uploads[2].payload["sums"]["votes"]
    # within the bound, but not one vote per student on every row
    votes[0] = [2, 2]
    with pytest.raises(UploadError, match=r"Party 2 refused: sums.votes: rows that are "
                       "not non-negative and summing to 2"):
        clone(clf).fit_server(uploads, X_public)
    votes[0] = [-1, 3]
    with pytest.raises(UploadError, match="sums.votes: a value of magnitude 3, beyond the "
                       "bound 2"):
        clone(clf).fit_server(uploads, X_public)
    # with min_parties, a party whose sums differ from the others' is left out
    uploads = _uploads(clf, data)
    uploads[4].payload["sums"]["votes"] = uploads[4].payload["sums"]["votes"][:-1]
    with pytest.warns(UserWarning, match="left out 1: 4: its sums are not the names"):
        served = clone(clf).fit_server(uploads, X_public, min_parties=4)
    assert served.parties_.tolist() == [0, 1, 2, 3] and 4 in served.left_out_parties_


@pytest.mark.parametrize("missing", ["proba", "class_counts", "evidence"])
def test_a_party_without_a_sum_its_pooling_needs_is_refused_naming_it(data, missing):
    """Each sum alone is valid, but the prior-corrected pooling's terms cannot be
    checked against probabilities or counts the party did not send: refused, naming
    what is missing, before the sums' layouts are compared."""
    clf = FedKTClassifier(_tree(), voting=SoftVotes(pooling="prior-corrected"),
                          random_state=0)
    uploads = _uploads(clf, data)
    del uploads[1].payload["sums"][missing]
    with pytest.raises(UploadError, match=f"Party 1 refused: sums: it sends no {missing}, "
                       "which the prior-corrected pooling sums"):
        clone(clf).fit_server(uploads, data[3])


def test_a_withheld_field_in_the_clear_is_refused_under_secure_aggregation(data, tmp_path):
    from skfedkt import InputLedger, PartyIdentity, SecureCoordinator

    X, y, party, X_public, _ = data
    clf = FedKTClassifier(_tree(), voting="hard", random_state=0)
    plain = _uploads(clf, data)
    identities = [PartyIdentity.generate() for _ in range(5)]
    session = clf.secure_session(list(range(5)), [u.manifest["n_rows"] for u in plain],
                                 identities=[key.public_bytes for key in identities])
    with skfedkt.config_context(secure_aggregation=True):
        uploads = [clf.fit_party(X[party == p], y[party == p], party=p, classes=[0, 1],
                                 X_unlabeled=X_public, secure_session=session,
                                 identity=identities[p]) for p in range(5)]
        assert all(upload.payload["students"] == [] and "sums" not in upload.payload
                   and upload.manifest["class_counts"] is None for upload in uploads)
        uploads[1].payload["students"] = plain[1].payload["students"]
        coordinator, sent = SecureCoordinator.start(session, [u.manifest for u in uploads])
        states = {upload.party: upload.secure_state for upload in uploads}
        while coordinator.stage != "done":
            sent = coordinator.advance([states[party].answer(
                message, InputLedger(tmp_path / f"ledger-{party}.json"))
                for party, message in sent.items()])
        with pytest.raises(UploadError, match="Party 1 refused: students: sent in the "
                           "clear, where secure aggregation keeps it at the party"):
            clone(clf).fit_server(uploads, X_public, secure_sum=coordinator)


def test_the_deployed_plain_steps_sum_what_fit_sums(data):
    X, y, party, X_public, X_test = data
    clf = FedKTClassifier(_tree(), random_state=0)
    uploads = [upload.to_bytes() for upload in _uploads(clf, data)]
    served = clone(clf).fit_server(uploads, X_public)
    fitted = clone(clf).fit(X, y, groups=party, X_unlabeled=X_public)
    np.testing.assert_array_equal(served.vote_counts_, fitted.vote_counts_)
    np.testing.assert_array_equal(served.predict_proba(X_test), fitted.predict_proba(X_test))
    # what a party sent: its students and its sums, the file's bytes
    assert (fitted.upload_bytes_ > 0).all()


def test_integer_sums_that_could_overflow_the_secure_sum_are_refused_before_any_work():
    from skfedkt._deployment._channel import Channel
    from skfedkt.algorithm import InSum

    channel = Channel((InSum("counts", "a count per row", "int",
                             lambda plan, max_rows: max_rows * 2.0 ** 40),))
    channel.check_fits(None, n_parties=100, max_rows=1000)
    with pytest.raises(ValueError, match="The sum 'counts' of 100 parties, each up to "
                       ".*would not fit a secure sum's 63 bits"):
        channel.check_fits(None, n_parties=100, max_rows=2 ** 20)
