"""FedKT's vote arithmetic (Algorithm 1, Vote-1 and Vote-2) on hand-made cases.

These pin the paper's hard voting (``voting="hard"``); soft voting is tested in
test_fedkt_skew.py.
"""

import warnings

import numpy as np
import pytest
from numpy.testing import assert_array_equal
from sklearn.datasets import make_classification
from sklearn.linear_model import LogisticRegression

from skfedkt import FedKTClassifier, HardVotes, LabelCollapseWarning
from skfedkt._fedkt._plan import resolved_votes
from skfedkt._fedkt._server import server_votes


def test_server_votes_with_and_without_consistent_voting():
    # 3 parties, 2 students each, 4 public examples
    student_predictions = np.array(
        [
            [[0, 1, 2, 0], [0, 1, 1, 0]],
            [[1, 1, 2, 2], [1, 1, 2, 0]],
            [[0, 2, 2, 1], [0, 2, 0, 1]],
        ]
    )
    consistent = server_votes(HardVotes(), student_predictions, 3)
    # a unanimous party gives its class n_students=2 votes, a split party none
    assert_array_equal(consistent, [[4, 2, 0], [0, 4, 2], [0, 0, 2], [2, 2, 0]])
    every_student = server_votes(HardVotes(consistent=False), student_predictions, 3)
    assert_array_equal(every_student, [[4, 2, 0], [0, 4, 2], [1, 1, 4], [3, 2, 1]])


def test_no_consistent_vote_anywhere_falls_back_to_every_student():
    disagreeing = np.array([[[0, 1], [1, 0]], [[1, 0], [0, 1]]])
    with pytest.warns(UserWarning, match="consistent voting leaves nothing"):
        votes = server_votes(HardVotes(), disagreeing, 2)
    assert_array_equal(votes, [[2, 2], [2, 2]])


def test_pure_parties_give_exact_histogram_and_constant_students():
    # every party holds one class: its teachers and students are constant predictors
    X = np.random.RandomState(0).normal(size=(60, 3))
    y = np.repeat(["x", "x", "y"], 20)
    party = np.repeat(["a", "b", "c"], 20)
    X_public = X[:7] + 0.5
    clf = FedKTClassifier(n_students=3, n_teachers=4, voting="hard", random_state=0)
    with pytest.warns(LabelCollapseWarning, match=r"single class \('x'\).*'y': 33%"):
        clf.fit(X, y, groups=party, X_unlabeled=X_public)
    assert_array_equal(clf.parties_, ["a", "b", "c"])
    assert_array_equal(clf.vote_counts_, np.tile([6, 3], (7, 1)))
    assert_array_equal(clf.public_labels_, ["x"] * 7)
    assert all(len(students) == 3 for students in clf.students_)
    assert_array_equal(clf.predict(X[:5]), ["x"] * 5)
    # 'y' was never learned by the final model: its probability column is all zero
    assert_array_equal(clf.predict_proba(X[:5]), np.tile([1.0, 0.0], (5, 1)))


@pytest.mark.parametrize("consistent_voting", [True, False])
def test_vote_counts_match_students_predictions(consistent_voting):
    X, y = make_classification(
        n_samples=300, n_features=6, n_informative=4, n_classes=3, random_state=0
    )
    party = np.arange(300) % 3
    X_public = X[:80] * 1.1
    clf = FedKTClassifier(
        LogisticRegression(), n_students=2, n_teachers=3,
        voting=HardVotes(consistent=consistent_voting), random_state=0,
    ).fit(X, y, groups=party, X_unlabeled=X_public)

    expected = np.zeros((80, 3), dtype=int)
    for students in clf.students_:
        # students that saw all three classes predict global class codes
        assert all(len(student.classes_) == 3 for student in students)
        predictions = [student.predict(X_public) for student in students]
        for i in range(80):
            votes = [p[i] for p in predictions]
            if not consistent_voting:
                for v in votes:
                    expected[i, v] += 1
            elif len(set(votes)) == 1:
                expected[i, votes[0]] += len(votes)
    assert_array_equal(clf.vote_counts_, expected)
    learned = expected.any(axis=1)
    assert_array_equal(clf.public_mask_, learned)
    # every label is one of the tied maxima of its histogram
    assert all(
        row[label] == row.max() for row, label in zip(expected[learned], clf.public_labels_)
    )


def test_examples_without_votes_are_left_out_of_final_training():
    X, y = make_classification(n_samples=200, n_features=5, flip_y=0.3, random_state=1)
    party = np.arange(200) % 4
    X_public = np.random.RandomState(1).normal(scale=3, size=(150, 5))
    clf = FedKTClassifier(n_students=3, voting="hard", random_state=0).fit(
        X, y, groups=party, X_unlabeled=X_public
    )
    no_vote = ~clf.vote_counts_.any(axis=1)
    assert no_vote.any(), "noisy labels should leave some public examples without a vote"
    assert_array_equal(clf.public_mask_, ~no_vote)
    assert len(clf.public_labels_) == (~no_vote).sum()
    assert clf.final_estimator_.tree_.n_node_samples[0] == (~no_vote).sum()


def test_voting_strings_are_the_default_vote_objects():
    from sklearn.base import clone

    from skfedkt import SoftVotes
    from skfedkt.privacy import ServerNoise

    for name, votes in (("soft", SoftVotes()), ("hard", HardVotes())):
        assert (resolved_votes(name, None).get_params()
                == resolved_votes(votes, None).get_params())
    # "auto" parts resolve by the privacy mechanism
    assert resolved_votes("soft", None).get_params() == dict(
        pooling="prior-corrected", match_shares=True, min_public_rows=2000)
    assert resolved_votes("soft", ServerNoise()).get_params() == dict(
        pooling="sum", match_shares=False, min_public_rows=2000)
    clf = FedKTClassifier(voting=SoftVotes()).set_params(voting__pooling="sum")
    assert clone(clf).voting.pooling == "sum"


@pytest.mark.parametrize("voting, expected", [
    ("soft", dict(pooling="prior-corrected", match_shares=True, min_public_rows=2000)),
    ("hard", dict(consistent=True, min_public_rows=0)),
])
def test_voting_shows_what_ran(voting, expected):
    X, y = make_classification(n_samples=200, random_state=0)
    clf = FedKTClassifier(n_teachers=2, voting=voting, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        clf.fit(X[:150], y[:150], groups=np.arange(150) % 3, X_unlabeled=X[150:])
    assert clf.voting_.get_params() == expected


def test_a_bad_vote_part_is_refused_naming_it():
    from skfedkt import SoftVotes

    X, y = make_classification(n_samples=100, random_state=0)
    with pytest.raises(ValueError, match="'pooling' parameter of SoftVotes must be a str"):
        FedKTClassifier(voting=SoftVotes(pooling="mean")).fit(X, y)
