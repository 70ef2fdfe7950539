import numpy as np
from numpy.testing import assert_array_equal

from skfedkt._voting import count_votes, plurality_vote


def test_count_votes_counts_weights_and_skips_abstentions():
    predictions = [[0, 2, -1, 1], [2, 2, -1, 1], [0, -1, -1, 0]]
    votes = count_votes(predictions, n_classes=3, weights=[1, 2, 3])
    assert_array_equal(votes, [[4, 0, 2], [0, 0, 3], [0, 0, 0], [3, 3, 0]])
    assert votes.dtype == np.int64


def test_plurality_vote_marks_examples_without_votes():
    labels = plurality_vote([[0, 0, 0], [0, 0, 5], [1, 0, 0]])
    assert_array_equal(labels, [-1, 2, 0])


def test_plurality_vote_breaks_ties_toward_overall_most_voted_class():
    # totals per class are [6, 8, 13]: class 2 wins every tie it is part of, and
    # class 1 (second overall) beats class 0
    votes = [[1, 1, 1], [3, 0, 3], [2, 2, 0], [0, 5, 9]]
    assert_array_equal(plurality_vote(votes), [2, 2, 1, 2])


def test_plurality_vote_tie_rule_does_not_favour_the_first_class():
    votes = np.array([[1, 1], [0, 4]])
    assert plurality_vote(votes)[0] == 1
    assert plurality_vote(votes[:, ::-1])[0] == 0


def test_plurality_vote_labels_every_row_of_noisy_votes():
    rng = np.random.RandomState(0)
    noisy = rng.laplace(size=(50, 4)) - 10
    labels = plurality_vote(noisy)
    assert_array_equal(labels, noisy.argmax(axis=1))
