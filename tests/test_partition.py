import numpy as np
import pytest
from numpy.testing import assert_array_equal
from sklearn.utils._param_validation import InvalidParameterError

from skfedkt.datasets import dirichlet_partition, iid_partition

Y = np.repeat(np.arange(5), 200)


def test_dirichlet_partition_respects_min_party_size_and_is_seeded():
    parties = dirichlet_partition(Y, 20, beta=0.5, min_party_size=15, random_state=0)
    assert parties.shape == Y.shape
    assert np.bincount(parties, minlength=20).min() >= 15
    assert_array_equal(parties, dirichlet_partition(Y, 20, min_party_size=15, random_state=0))


def test_small_beta_skews_labels_and_large_beta_approaches_iid():
    def mean_classes_per_party(beta):
        parties = dirichlet_partition(Y, 10, beta=beta, min_party_size=1, random_state=0)
        return np.mean([len(np.unique(Y[parties == p])) for p in range(10)])

    assert mean_classes_per_party(0.1) < 3
    assert mean_classes_per_party(100.0) == 5


def test_self_balancing_keeps_party_sizes_comparable():
    sizes = {
        balancing: np.bincount(
            dirichlet_partition(Y, 10, beta=0.3, min_party_size=1, self_balancing=balancing,
                                random_state=0), minlength=10
        )
        for balancing in (True, False)
    }
    assert sizes[True].std() < sizes[False].std()


def test_dirichlet_partition_errors():
    with pytest.raises(ValueError, match="Cannot give 200 parties at least min_party_size=10"):
        dirichlet_partition(Y, 200)
    with pytest.raises(InvalidParameterError, match="beta"):
        dirichlet_partition(Y, 5, beta=0)


def test_iid_partition_sizes_and_errors():
    parties = iid_partition(11, 3, random_state=0)
    assert_array_equal(np.bincount(parties), [4, 4, 3])
    with pytest.raises(ValueError, match="Cannot split 2 rows into 3"):
        iid_partition(2, 3)


def test_thousands_of_small_parties_get_their_minimum_and_keep_their_skew():
    # 3,000 parties of about 38 rows from two imbalanced classes: no Dirichlet draw gives
    # every party 10 rows, so the last draw is filled up
    y = np.r_[np.zeros(90_000, dtype=int), np.ones(24_000, dtype=int)]
    parties = dirichlet_partition(y, 3000, beta=0.5, min_party_size=10, random_state=0)
    sizes = np.bincount(parties, minlength=3000)
    assert sizes.min() == 10 and sizes.max() > 10 * np.median(sizes) / 2
    minority_share = np.bincount(parties, weights=y, minlength=3000) / sizes
    # label skew: many parties far from the overall 21% minority share
    assert np.mean(np.abs(minority_share - y.mean()) > 0.2) > 0.3
    assert_array_equal(parties, dirichlet_partition(y, 3000, beta=0.5, min_party_size=10,
                                                    random_state=0))
    with pytest.raises(ValueError, match="Cannot give 3000 parties at least"):
        dirichlet_partition(y, 3000, min_party_size=40)
    # a draw that leaves parties short at a tiny beta is filled up too
    parties = dirichlet_partition(Y, 50, beta=0.01, min_party_size=19, self_balancing=False,
                                  random_state=0)
    assert np.bincount(parties, minlength=50).min() == 19
