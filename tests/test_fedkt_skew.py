"""FedKT under label skew: soft votes, students on party rows, class shares, warnings."""

import warnings

import numpy as np
import pytest
from _data import noise_at
from numpy.testing import assert_allclose, assert_array_equal
from sklearn import config_context
from sklearn.base import BaseEstimator, ClassifierMixin, clone
from sklearn.datasets import make_classification
from sklearn.ensemble import RandomForestClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.neighbors import KNeighborsClassifier
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.tree import DecisionTreeClassifier
from xgboost import XGBClassifier

from skfedkt import FedKTClassifier, HardVotes, LabelCollapseWarning, SoftVotes
from skfedkt._engine._voting import prior_corrected_proba, share_matching_offsets
from skfedkt.datasets import load_federated
from skfedkt.privacy import (
    PartyNoise,
    ServerNoise,
    data_independent_epsilon,
    pate_epsilon,
)


class ProbabilityOnlyTeacher(ClassifierMixin, BaseEstimator):
    """Predicts its first class, yet gives its second class the larger probability."""

    def fit(self, X, y):
        self.classes_ = np.unique(y)
        return self

    def predict(self, X):
        return np.full(len(X), self.classes_[0])

    def predict_proba(self, X):
        return np.tile([0.4, 0.6], (len(X), 1))


class WeightRecordingTree(DecisionTreeClassifier):
    """A decision tree that remembers the rows, labels and sample weights it was fit on."""

    def fit(self, X, y, sample_weight=None, check_input=True):
        self.fit_rows_, self.fit_labels_, self.fit_weights_ = len(X), np.asarray(y), sample_weight
        return super().fit(X, y, sample_weight=sample_weight, check_input=check_input)


@pytest.fixture(scope="module")
def two_class_data():
    X, y = make_classification(n_samples=400, n_features=5, n_informative=3, random_state=0)
    party = np.arange(320) % 4
    return X[:320], y[:320], party, X[320:]


def _fit_quietly(clf, X, y, **fit_params):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LabelCollapseWarning)
        return clf.fit(X, y, **fit_params)


@pytest.mark.parametrize("voting, expected", [("soft", 1), ("hard", 0)])
def test_teachers_vote_with_probabilities_under_soft_voting(two_class_data, voting, expected):
    X, y, party, X_public = two_class_data
    clf = FedKTClassifier(ProbabilityOnlyTeacher(), student_estimator=DecisionTreeClassifier(),
                          voting=voting, student_data="public", soft_labels=None,
                          random_state=0)
    _fit_quietly(clf, X, y, groups=party, X_unlabeled=X_public)
    # soft: 0.6 > 0.4 for the second class in every teacher; hard: every vote the first
    assert_array_equal(clf.class_shares_["students"][..., expected], 1.0)
    assert_array_equal(clf.public_labels_, np.full(len(X_public), expected))


def test_server_sums_the_students_probabilities(two_class_data):
    X, y, party, X_public = two_class_data
    clf = FedKTClassifier(LogisticRegression(), voting=SoftVotes(pooling="sum"),
                          random_state=0).fit(
        X, y, groups=party, X_unlabeled=X_public
    )
    expected = sum(student.predict_proba(X_public) for students in clf.students_
                   for student in students)
    assert_allclose(clf.vote_counts_, expected)
    # every student's vote has L1 mass one: the sensitivity argument of the privacy docs
    assert_allclose(clf.vote_counts_.sum(axis=1), 4 * clf.n_students)
    assert_array_equal(clf.public_labels_,
                       (np.log(clf.vote_counts_) + clf.share_offsets_).argmax(axis=1))


def test_server_pools_prior_corrected_probabilities_by_default(two_class_data):
    X, y, _, X_public = two_class_data
    party = np.where(y == 1, np.arange(len(y)) % 2, 2 + np.arange(len(y)) % 2)
    party[:20] = 3 - party[:20]  # four parties of skewed class mixes
    # one teacher per partition and soft student labels: every student predicts both
    # classes, so its probabilities are the party's
    clf = FedKTClassifier(LogisticRegression(), n_teachers=1, soft_labels="students",
                          random_state=0).fit(X, y, groups=party, X_unlabeled=X_public)
    party_proba = np.array([
        np.mean([student.predict_proba(X_public) for student in students], axis=0)
        for students in clf.students_
    ])
    counts = np.array([np.bincount(y[party == p], minlength=2) for p in clf.parties_])
    expected = 2 * 4 * prior_corrected_proba(party_proba, counts)
    assert_allclose(clf.vote_counts_, expected)
    assert_allclose(clf.vote_counts_.sum(axis=1), 8)


def test_prior_corrected_pooling_recovers_the_global_posterior_under_label_skew():
    # parties share p(x | k) and differ in class shares: p_i(k | x) ~ pi_i(k) * lik(k)
    rng = np.random.RandomState(0)
    likelihood = rng.dirichlet(np.ones(3), size=50)
    counts = np.array([[80, 15, 5], [5, 90, 5], [30, 30, 40], [10, 10, 80]])
    shares = counts / counts.sum(axis=1, keepdims=True)
    party_proba = shares[:, None] * likelihood
    party_proba /= party_proba.sum(axis=2, keepdims=True)
    pooled = prior_corrected_proba(party_proba, counts, smoothing=0.0, n_iter=200)
    truth = counts.sum(axis=0) * likelihood
    truth /= truth.sum(axis=1, keepdims=True)
    # half the exact posterior, half the parties' plain mean (the documented hedge)
    assert_allclose(pooled, (truth + party_proba.mean(axis=0)) / 2, atol=1e-6)


def _pooled_half(party_proba, counts):
    """The prior-corrected part of `prior_corrected_proba`, without smoothing."""
    pooled = prior_corrected_proba(party_proba, counts, smoothing=0.0, n_iter=200)
    informative = (counts > 0).sum(axis=1) >= 2
    weight = counts[informative].sum() / counts.sum() / 2
    return (pooled - (1 - weight) * party_proba.mean(axis=0)) / weight


def test_prior_corrected_pooling_ignores_what_a_party_never_saw():
    rng = np.random.RandomState(1)
    party_proba = rng.dirichlet(np.ones(3), size=(3, 20))
    counts = np.array([[50, 30, 20], [20, 40, 40], [0, 60, 40]])
    before = _pooled_half(party_proba, counts)
    # party 2 never saw class 0: how sure it is of class 0 does not matter, only how it
    # ranks the classes it holds
    changed = party_proba.copy()
    held = changed[2, :, 1:] / changed[2, :, 1:].sum(axis=1, keepdims=True)
    changed[2] = np.column_stack([np.full(20, 0.98), 0.02 * held])
    assert_allclose(_pooled_half(changed, counts), before, atol=1e-6)
    # a party holding one class carries no evidence: only the global prior moves
    single = np.concatenate([party_proba, np.tile([0.0, 1.0, 0.0], (1, 20, 1))])
    single_counts = np.vstack([counts, [0, 100, 0]])
    reweighted = before * single_counts.sum(axis=0) / counts.sum(axis=0)
    assert_allclose(_pooled_half(single, single_counts),
                    reweighted / reweighted.sum(axis=1, keepdims=True), atol=1e-6)


@pytest.mark.parametrize("privacy", [ServerNoise(), PartyNoise(counts_gamma=None)])
def test_prior_corrected_pooling_is_refused_where_unsupported(two_class_data, privacy):
    # with hard votes there is no pooling to set: HardVotes has no such part
    X, y, party, X_public = two_class_data
    clf = FedKTClassifier(voting=SoftVotes(pooling="prior-corrected"), privacy=privacy)
    with pytest.raises(ValueError,
                       match=r"SoftVotes\(pooling='prior-corrected'\).*no privacy accountant"):
        clf.fit(X, y, groups=party, X_unlabeled=X_public)


def test_evidence_from_few_rows_counts_little():
    # nine single-class parties and one small mixed party: the pooled evidence rests on
    # 35 of 15,000 rows, so the result stays with the parties' plain mean
    counts = np.array([[0, 2000]] * 3 + [[3000, 0]] * 6 + [[7, 28]])
    party_proba = np.random.RandomState(0).dirichlet(np.ones(2), size=(10, 30))
    pooled = prior_corrected_proba(party_proba, counts)
    mean = party_proba.mean(axis=0)
    assert np.abs(pooled - mean).max() < 35 / counts.sum()


def test_pooling_without_any_mixed_party_is_the_plain_mean():
    party_proba = np.random.RandomState(0).dirichlet(np.ones(3), size=(4, 20))
    counts = np.array([[50, 0, 0], [0, 30, 0], [0, 0, 20], [10, 0, 0]])
    assert_allclose(prior_corrected_proba(party_proba, counts), party_proba.mean(axis=0))


def test_share_matching_offsets_reach_the_target_shares():
    rng = np.random.RandomState(0)
    proba = rng.dirichlet(np.ones(4), size=2000) * [5, 1, 1, 1]
    target = np.array([0.1, 0.2, 0.3, 0.4])
    offsets = share_matching_offsets(proba, target)
    labels = (np.log(proba) + offsets).argmax(axis=1)
    assert np.abs(np.bincount(labels, minlength=4) / 2000 - target).sum() < 0.01


def test_share_matching_converges_where_every_vote_lies_within_one_step():
    # pooled votes that all lean to class 0 by log-ratios spread by 0.1 (a census L2 fit's
    # were): a fixed step of 0.1 overshot back and forth and kept zero offsets, one class
    rng = np.random.RandomState(0)
    minority = 1 / (1 + np.exp(-rng.normal(-0.46, 0.1, size=4070)))
    proba = np.column_stack([1 - minority, minority])
    tolerance = np.sqrt(0.24 * 0.76 / 4070)
    offsets = share_matching_offsets(proba, np.array([0.76, 0.24]), tolerance=tolerance)
    labels = (np.log(proba) + offsets).argmax(axis=1)
    assert abs(np.mean(labels) - 0.24) <= tolerance


def test_share_matching_keeps_labels_that_already_match_and_classes_without_scores():
    proba = np.array([[0.9, 0.1, 0.0], [0.2, 0.8, 0.0], [0.7, 0.3, 0.0], [0.4, 0.6, 0.0]])
    assert_array_equal(share_matching_offsets(proba, np.array([0.5, 0.5, 0.0])), 0.0)
    # no example gives class 2 any probability: it keeps offset zero and gets no label
    offsets = share_matching_offsets(proba, np.array([0.25, 0.25, 0.5]))
    assert offsets[2] == 0.0
    assert not np.any((np.log(proba + 1e-300) + offsets).argmax(axis=1) == 2)


def _minority_data(seed=0):
    """Ten parties, most holding a few minority rows: forests under-count them."""
    X, y = make_classification(n_samples=3000, n_features=8, n_informative=4,
                               weights=[0.75], flip_y=0.0, random_state=seed)
    rng = np.random.RandomState(seed)
    share = rng.dirichlet([0.3, 0.3], size=10)[:, 1]
    party = np.where(y == 1, rng.choice(10, size=len(y), p=share / share.sum()),
                     rng.choice(10, size=len(y), p=(1 - share) / (1 - share).sum()))
    return X[:2400], y[:2400], party[:2400], X[2400:]


def test_matched_server_labels_hold_the_training_shares():
    X, y, party, X_public = _minority_data()
    forest = RandomForestClassifier(n_estimators=20, max_depth=4)
    unmatched = _fit_quietly(FedKTClassifier(forest, voting=SoftVotes(match_shares=False),
                                             random_state=0),
                             X, y, groups=party, X_unlabeled=X_public)
    matched = _fit_quietly(FedKTClassifier(forest, random_state=0), X, y, groups=party,
                           X_unlabeled=X_public)
    training = matched.class_shares_["training"][1]
    assert_array_equal(unmatched.share_offsets_, 0.0)
    # within one standard error of a random public set's share, to the row
    n_public = len(X_public)
    tolerance = np.sqrt(training * (1 - training) / n_public) + 1 / n_public
    assert abs(matched.class_shares_["final"][1] - training) <= tolerance
    assert abs(unmatched.class_shares_["final"][1] - training) > 2 * tolerance
    assert matched.share_offsets_[1] > matched.share_offsets_[0]
    # the final model learned the shifted argmax of the server's votes
    assert_array_equal(
        np.searchsorted(matched.classes_, matched.public_labels_),
        (np.log(matched.vote_counts_) + matched.share_offsets_).argmax(axis=1),
    )


@pytest.mark.parametrize("options", [dict(privacy=ServerNoise()),
                                     dict(privacy=PartyNoise(counts_gamma=None)),
                                     dict(voting="hard")])
def test_share_matching_is_off_by_default_and_refused_where_unsupported(two_class_data,
                                                                        options):
    X, y, party, X_public = two_class_data
    clf = _fit_quietly(FedKTClassifier(LogisticRegression(), random_state=0, **options),
                       X, y, groups=party, X_unlabeled=X_public)
    assert_array_equal(clf.share_offsets_, 0.0)
    if "privacy" in options:
        with pytest.raises(ValueError,
                           match=r"SoftVotes\(match_shares=True\).*no privacy accountant"):
            FedKTClassifier(voting=SoftVotes(match_shares=True), **options).fit(
                X, y, groups=party, X_unlabeled=X_public)


def test_every_party_feeds_its_disjoint_teachers(two_class_data):
    X, y, party, X_public = two_class_data
    tiny = np.r_[np.zeros(len(X) - 3), np.ones(3)]  # party 1 holds only three rows
    for options in (dict(n_teachers=5), dict(voting="hard"), dict(privacy=PartyNoise())):
        with pytest.raises(ValueError, match="Party 1.0 has 3 sample.*n_teachers=5"):
            FedKTClassifier(**options).fit(X, y, groups=tiny, X_unlabeled=X_public)
    # one teacher per partition, or with "auto" as many as it has rows, up to three
    for n_teachers, expected in ((1, 1), ("auto", 3)):
        clf = _fit_quietly(FedKTClassifier(n_teachers=n_teachers, random_state=0), X, y,
                           groups=tiny, X_unlabeled=X_public)
        assert clf.n_teachers_[-1] == expected


def test_auto_teachers_are_sized_by_the_party_rows(capsys):
    X, y = make_classification(n_samples=1000, random_state=0)
    # 50, 450 and 500 rows: at least three teachers, at most five, of 100 rows or more
    party = np.repeat([0, 1, 2], [50, 450, 500])
    fit = dict(groups=party, X_unlabeled=X[:100])
    clf = _fit_quietly(FedKTClassifier(random_state=0, verbose=1), X, y, **fit)
    assert_array_equal(clf.n_teachers_, [3, 4, 5])
    assert "24 teachers (3 parties x 2 partitions x 3-5 subsets)" in capsys.readouterr().out
    # the paper's five with hard votes and with noise: part of the algorithm or its analysis
    for options in (dict(voting="hard"), dict(privacy=ServerNoise())):
        clf = _fit_quietly(FedKTClassifier(random_state=0, **options), X, y, **fit)
        assert_array_equal(clf.n_teachers_, [5, 5, 5])
    # a party's step decides alone, and the server checks it against the party's rows
    upload = FedKTClassifier(random_state=0).fit_party(
        X[party == 1], y[party == 1], party=1, classes=[0, 1], X_unlabeled=X[:100])
    assert upload.manifest["n_teachers"] == 4


@pytest.mark.parametrize("student_data, party_rows", [("public", False),
                                                      ("party+public", True)])
def test_students_learn_their_party_rows_when_asked(two_class_data, student_data, party_rows):
    X, y, party, X_public = two_class_data
    clf = FedKTClassifier(DecisionTreeClassifier(), student_estimator=WeightRecordingTree(),
                          student_data=student_data, voting=SoftVotes(min_public_rows=0),
                          random_state=0)
    _fit_quietly(clf, X, y, groups=party, X_unlabeled=X_public)
    for label, students in zip(clf.parties_, clf.students_):
        n_party = np.sum(party == label) if party_rows else 0
        assert all(s.fit_rows_ == len(X_public) + n_party for s in students)
    if party_rows:
        # the party's own rows come with their true labels, after the public rows
        student = clf.students_[0][0]
        assert_array_equal(student.fit_labels_[len(X_public):], y[party == 0])


def test_students_on_party_rows_are_refused_at_l2(two_class_data):
    X, y, party, X_public = two_class_data
    clf = FedKTClassifier(student_data="party+public", privacy=PartyNoise())
    with pytest.raises(ValueError, match=r"student_data='party\+public'.*PartyNoise"):
        clf.fit(X, y, groups=party, X_unlabeled=X_public)


@pytest.mark.parametrize("routing", [False, True])
def test_soft_labels_reach_students_and_final_model_as_weights(two_class_data, routing):
    X, y, party, X_public = two_class_data
    clf = FedKTClassifier(LogisticRegression(), student_estimator=WeightRecordingTree(),
                          final_estimator=make_pipeline(StandardScaler(), WeightRecordingTree()),
                          soft_labels="all", voting=SoftVotes(min_public_rows=0), random_state=0)
    with config_context(enable_metadata_routing=routing):
        _fit_quietly(clf, X, y, groups=party, X_unlabeled=X_public)
    student = clf.students_[0][0]
    # one row per public example and class of positive probability, weights summing to 1
    assert len(student.fit_labels_) > len(X_public)
    assert_allclose(student.fit_weights_.sum(), len(X_public))
    final = clf.final_estimator_[-1]
    assert_allclose(final.fit_weights_.sum(), len(X_public))
    assert_allclose(clf.class_shares_["final"].sum(), 1.0)
    assert 0 < clf.class_shares_["final"][0] < 1


def test_soft_labels_need_sample_weight(two_class_data):
    X, y, party, X_public = two_class_data
    clf = FedKTClassifier(student_estimator=KNeighborsClassifier(), soft_labels="all")
    with pytest.raises(ValueError, match="student_estimator KNeighborsClassifier takes no "
                                         "sample_weight"):
        clf.fit(X, y, groups=party, X_unlabeled=X_public)


@pytest.mark.parametrize("n_public", [80, 20])
def test_students_learn_soft_labels_weighing_at_most_their_party_rows(two_class_data,
                                                                      n_public):
    X, y, _, X_public = two_class_data
    party = np.arange(len(y)) % 8  # 40 rows each: fewer than 80 public rows, more than 20
    X_public = X_public[:n_public]
    clf = FedKTClassifier(LogisticRegression(), student_estimator=WeightRecordingTree(),
                          final_estimator=WeightRecordingTree(), student_data="party+public",
                          soft_labels="students", voting=SoftVotes(min_public_rows=0),
                          random_state=0)
    _fit_quietly(clf, X, y, groups=party, X_unlabeled=X_public)
    n_party = np.sum(party == 0)
    weights = clf.students_[0][0].fit_weights_
    # the public rows' weights: the teachers' probabilities, scaled down to weigh
    # together at most as much as the party's own rows (weight one each, stacked last)
    assert_array_equal(weights[-n_party:], 1.0)
    assert_allclose(weights[:-n_party].sum(), min(n_public, n_party))
    assert len(weights) - n_party > n_public  # one weighted row per example and class
    # the final model learns the server's winning classes: no weights
    assert clf.final_estimator_.fit_weights_ is None


class UnweightedTree(DecisionTreeClassifier):
    """A decision tree whose fit takes no sample_weight; remembers how many rows it saw."""

    def fit(self, X, y):
        self.fit_rows_ = len(X)
        return super().fit(X, y)


def test_soft_student_labels_fall_back_and_refuse_without_sample_weight(two_class_data):
    X, y, party, X_public = two_class_data
    clf = _fit_quietly(FedKTClassifier(LogisticRegression(), student_estimator=UnweightedTree(),
                                       voting=SoftVotes(min_public_rows=0), random_state=0),
                       X, y, groups=party, X_unlabeled=X_public)
    # by default students learn winning classes: one row per public example
    assert clf.students_[0][0].fit_rows_ == len(X_public)
    with pytest.raises(ValueError, match="soft_labels='students' teaches the students"):
        clf.set_params(soft_labels="students").fit(X, y, groups=party, X_unlabeled=X_public)


@pytest.mark.parametrize("level", ["L1", "L2"])
def test_default_labels_keep_the_data_dependent_bound(two_class_data, level):
    # students learn winning classes by default: at L2 the noisy argmax is what the
    # data-dependent bound covers; at L1 the server's argmax is, whatever students learn
    X, y, party, X_public = two_class_data
    clf = FedKTClassifier(LogisticRegression(), student_estimator=WeightRecordingTree(),
                          privacy=noise_at(level, gamma=0.5, query_fraction=0.25),
                          random_state=0)
    _fit_quietly(clf, X, y, groups=party, X_unlabeled=X_public)
    assert clf.students_[0][0].fit_weights_ is None
    assert np.isfinite(clf.privacy_report_.data_dependent_epsilon)
    assert "noisy-argmax queries" in clf.privacy_report_.statement


def test_undistilled_model_predicts_with_the_servers_vote(two_class_data):
    X, y, party, X_public = two_class_data
    params = dict(estimator=RandomForestClassifier(10, max_depth=4), random_state=0)
    distilled = _fit_quietly(FedKTClassifier(**params), X, y, groups=party,
                             X_unlabeled=X_public)
    # refitting a distilled model without distillation leaves no final model behind
    undistilled = _fit_quietly(clone(distilled).fit(X, y, groups=party, X_unlabeled=X_public)
                               .set_params(distill=False), X, y, groups=party,
                               X_unlabeled=X_public)
    assert not hasattr(undistilled, "final_estimator_")
    assert not hasattr(undistilled, "decision_function")
    # the same students and the same vote; on the public rows the vote gives the labels
    assert_array_equal(undistilled.vote_counts_, distilled.vote_counts_)
    assert_array_equal(undistilled.predict(X_public), distilled.public_labels_)
    proba = undistilled.predict_proba(X)
    assert_allclose(proba.sum(axis=1), 1)
    assert_allclose(proba, distilled._student_vote_proba(X))
    assert_array_equal(undistilled.predict(X), undistilled.classes_[proba.argmax(axis=1)])


def test_undistilled_model_is_refused_where_its_votes_are_not_covered(two_class_data):
    X, y, party, X_public = two_class_data
    with pytest.raises(ValueError, match="distill=False .* at L1 only the server's"):
        FedKTClassifier(distill=False, privacy=ServerNoise()).fit(
            X, y, groups=party, X_unlabeled=X_public)


@pytest.mark.parametrize("consistent", [True, False])
def test_undistilled_hard_votes_are_the_students_vote_shares(two_class_data, consistent):
    X, y, party, X_public = two_class_data
    undistilled = _fit_quietly(
        FedKTClassifier(voting=HardVotes(consistent=consistent), distill=False,
                        random_state=0), X, y, groups=party, X_unlabeled=X_public)
    votes = undistilled.vote_counts_[: len(X_public)]
    voted = votes.sum(axis=1) > 0
    # on the public rows, the server's own histogram, normalised
    assert_allclose(undistilled.predict_proba(X_public)[voted],
                    votes[voted] / votes[voted].sum(axis=1, keepdims=True))
    proba = undistilled.predict_proba(X)
    assert_allclose(proba.sum(axis=1), 1)  # rows no party agrees on: every student's vote
    # vote shares: of the agreeing parties, or of every student
    voters = len(undistilled.parties_) * (1 if consistent else undistilled.n_students)
    multiples = proba * np.arange(1, voters + 1)[:, None, None]
    assert np.isclose(multiples, np.round(multiples)).all(axis=2).any(axis=0).all()


def test_undistilled_model_keeps_the_l2_guarantee(two_class_data):
    X, y, party, X_public = two_class_data
    params = dict(privacy=PartyNoise(gamma=0.5), random_state=0)
    distilled = _fit_quietly(FedKTClassifier(**params), X, y, groups=party,
                             X_unlabeled=X_public)
    undistilled = _fit_quietly(FedKTClassifier(distill=False, **params), X, y,
                               groups=party, X_unlabeled=X_public)
    # at L2 the students are private: the vote computed from them is covered as they are
    assert undistilled.epsilon_ == distilled.epsilon_ < np.inf
    assert undistilled.predict(X).shape == (len(X),)


def test_class_shares_of_every_tier(two_class_data):
    X, y, party, X_public = two_class_data
    clf = _fit_quietly(FedKTClassifier(voting="hard", random_state=0), X, y, groups=party,
                       X_unlabeled=X_public)
    shares = clf.class_shares_
    assert_allclose(shares["training"], np.bincount(y) / len(y))
    assert_allclose(shares["parties"][1], np.bincount(y[party == 1], minlength=2)
                    / np.sum(party == 1))
    assert shares["students"].shape == (4, 2, 2)
    assert_allclose(shares["students"].sum(axis=-1), 1.0)
    learned = np.searchsorted(clf.classes_, clf.public_labels_)
    assert_allclose(shares["final"], np.bincount(learned, minlength=2) / len(learned))


# the public set lies far from the training rows on purpose
@pytest.mark.filterwarnings("ignore:X_unlabeled is far from X")
def test_collapse_to_one_class_warns_at_both_tiers():
    # every public example lies deep in the region of class 'b': all models label it 'b'
    rng = np.random.RandomState(0)
    X = np.r_[rng.normal(-2, 1, size=(100, 2)), rng.normal(2, 1, size=(100, 2))]
    y = np.repeat(["a", "b"], 100)
    party = np.arange(200) % 2
    X_public = rng.normal(2, 0.1, size=(30, 2)) + [20, 0]
    with pytest.warns(LabelCollapseWarning) as caught:
        FedKTClassifier(random_state=0).fit(X, y, groups=party, X_unlabeled=X_public)
    messages = [str(w.message) for w in caught]
    assert any("students learned a single class from a party whose rows hold several"
               in m and "'a' 50%, 'b' 50%" in m for m in messages)
    assert any("The final model learned a single class ('b')" in m
               and "'a': 50% of the training rows, 0% of the server's labels" in m
               for m in messages)


def test_final_model_that_cannot_split_warns(two_class_data):
    X, y, party, X_public = two_class_data
    clf = FedKTClassifier(LogisticRegression(),
                          final_estimator=DecisionTreeClassifier(min_samples_leaf=1000),
                          voting=SoftVotes(min_public_rows=0), random_state=0)
    with pytest.warns(LabelCollapseWarning, match="final model DecisionTreeClassifier "
                                                  "predicts on the 80 public rows it "
                                                  "learned a single class.*min_samples"):
        clf.fit(X, y, groups=party, X_unlabeled=X_public)


def test_a_public_set_from_the_same_distribution_raises_no_warning(two_class_data):
    X, y, party, X_public = two_class_data
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        FedKTClassifier(LogisticRegression(), random_state=0).fit(
            X, y, groups=party, X_unlabeled=X_public
        )


def test_skewed_xgboost_parties_no_longer_collapse():
    # the reproduction: paper-FedKT labelled (nearly) everything one class here.
    # About 40 rows a party: five disjoint teachers of 8 rows each predict a constant
    # (the default collapses too, and warns), one teacher per partition does not
    scores = {}
    for voting in ("soft", "hard"):
        data = load_federated("breast_cancer", n_parties=10, random_state=1)
        clf = FedKTClassifier(XGBClassifier(n_estimators=20, max_depth=4), voting=voting,
                              n_teachers=1 if voting == "soft" else 5, random_state=1)
        _fit_quietly(clf, data.X_train, data.y_train, groups=data.groups,
                     X_unlabeled=data.X_public)
        scores[voting] = clf.score(data.X_test, data.y_test)
    assert scores["soft"] > 0.85
    assert scores["soft"] > scores["hard"] + 0.15


def test_soft_votes_keep_the_data_dependent_accountant_at_l1(two_class_data):
    X, y, party, X_public = two_class_data
    clf = FedKTClassifier(LogisticRegression(),
                          privacy=ServerNoise(gamma=0.5, query_fraction=0.25),
                          random_state=0).fit(
        X, y, groups=party, X_unlabeled=X_public
    )
    report = clf.privacy_report_
    queries = 20  # a quarter of the 80 public examples
    assert report.n_queries == queries
    # votes are real-valued; Lemma 4's bound holds for real counts: same formula
    expected = pate_epsilon(clf.vote_counts_[clf.public_mask_], gamma=0.5, delta=1e-5,
                            sensitivity=4.0)
    assert report.data_dependent_epsilon == pytest.approx(expected)
    independent = data_independent_epsilon(queries, gamma=0.5, delta=1e-5, sensitivity=4.0)
    assert report.data_independent_epsilon == pytest.approx(independent)
    assert clf.epsilon_ == pytest.approx(min(expected, independent))


@pytest.mark.parametrize("level, sensitivity, releases", [("L1", 4.0, 20), ("L2", 2.0, 40)])
def test_soft_labels_release_histograms_only_data_independent_epsilon(
    two_class_data, level, sensitivity, releases
):
    X, y, party, X_public = two_class_data
    clf = FedKTClassifier(LogisticRegression(),
                          privacy=noise_at(level, gamma=0.5, query_fraction=0.25),
                          soft_labels="all", random_state=0).fit(
        X, y, groups=party, X_unlabeled=X_public
    )
    report = clf.privacy_report_
    assert np.isnan(report.data_dependent_epsilon)
    # L2: each party's 2 partitions release 20 histograms each, and its class counts
    # (Laplace of the votes' scale 1/0.5: pure 2 * 0.5)
    expected = data_independent_epsilon(releases, gamma=0.5, delta=1e-5,
                                         sensitivity=sensitivity) + (1.0 if level == "L2" else 0)
    assert clf.epsilon_ == pytest.approx(expected)
    assert "noisy histograms (soft labels)" in report.statement
