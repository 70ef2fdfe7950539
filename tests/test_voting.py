import numpy as np
from numpy.testing import assert_array_equal

from skfedkt._engine._voting import class_shares, count_votes, plurality_vote


def test_count_votes_counts_weights_and_skips_abstentions():
    predictions = [[0, 2, -1, 1], [2, 2, -1, 1], [0, -1, -1, 0]]
    votes = count_votes(predictions, n_classes=3, weights=[1, 2, 3])
    assert_array_equal(votes, [[4, 0, 2], [0, 0, 3], [0, 0, 0], [3, 3, 0]])
    assert votes.dtype == np.int64


def test_plurality_vote_marks_examples_without_votes():
    labels = plurality_vote([[0, 0, 0], [0, 0, 5], [1, 0, 0]], 0)
    assert_array_equal(labels, [-1, 2, 0])


def test_plurality_vote_breaks_ties_uniformly_among_tied_classes():
    # class 0 has by far the most votes overall; a tie between classes 1 and 2 must
    # still never go to class 0, and go to 1 or 2 half of the time each
    votes = np.array([[50, 0, 0]] * 500 + [[0, 3, 3]] * 2000)
    labels = plurality_vote(votes, 0)[500:]
    assert set(labels) == {1, 2}
    # binomial(2000, 1/2): 4 standard deviations are about 89
    assert abs(np.sum(labels == 1) - 1000) < 90
    three_way = plurality_vote(np.ones((3000, 3)), 1)
    assert np.all(np.abs(np.bincount(three_way) - 1000) < 4 * np.sqrt(3000 * 2 / 9))


def test_plurality_vote_ties_are_reproducible_from_the_seed():
    votes = np.ones((50, 4))
    assert_array_equal(plurality_vote(votes, 3), plurality_vote(votes, 3))
    assert not np.array_equal(plurality_vote(votes, 3), plurality_vote(votes, 4))


def test_plurality_vote_with_fixed_keys_keeps_its_tie_breaks():
    keys = np.random.RandomState(0).random_sample((40, 3))
    tied = np.ones((40, 3))
    # the same keys give the same winners, round after round
    assert_array_equal(plurality_vote(tied, keys), plurality_vote(tied.copy(), keys))
    assert_array_equal(plurality_vote(tied, keys), keys.argmax(axis=1))


def test_plurality_vote_labels_every_row_of_noisy_or_soft_votes():
    rng = np.random.RandomState(0)
    noisy = rng.laplace(size=(50, 4)) - 10
    assert_array_equal(plurality_vote(noisy, 0), noisy.argmax(axis=1))
    soft = rng.dirichlet(np.ones(4), size=50) * 3
    assert_array_equal(plurality_vote(soft, 0), soft.argmax(axis=1))


def test_class_shares_of_counts_and_distributions():
    assert_array_equal(class_shares([[3, 1], [0, 0]]), [0.75, 0.25])
    assert_array_equal(class_shares([[0.5, 0.5], [0.0, 1.0]]), [0.25, 0.75])
    assert_array_equal(class_shares(np.zeros((2, 3))), [0, 0, 0])
