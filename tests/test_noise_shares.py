"""Noise in shares: any threshold's number of parties' shares sum to the mechanism's
discrete Laplace noise, and more survivors to a known wider distribution."""

import numpy as np
import pytest
from scipy import stats

from skfedkt._privacy._noise_shares import discrete_laplace_pmf, discrete_laplace_share

N_DRAWS = 10_000


def _chi_square_pvalue(draws, pmf_of):
    """Goodness of fit of integer draws to a pmf: the values expected at least 5 times
    are bins of their own, every other value one bin."""
    support = np.arange(draws.min(), draws.max() + 1)
    expected = pmf_of(support) * len(draws)
    observed = np.bincount(draws - draws.min())
    keep = expected >= 5
    return stats.chisquare(
        np.append(observed[keep], len(draws) - observed[keep].sum()),
        np.append(expected[keep], len(draws) - expected[keep].sum())).pvalue


def _polya_difference_pmf(gamma, shape, support):
    """P(k) of the difference of two negative binomial variables of `shape` and success
    ``1 - exp(-gamma)``."""
    success = -np.expm1(-gamma)
    side = stats.nbinom.pmf(np.arange(400), shape, success)
    difference = np.convolve(side, side[::-1])  # index i: k = i - 399
    return difference[np.asarray(support) + 399]


@pytest.mark.parametrize("gamma", [0.05, 0.5])
def test_the_thresholds_shares_sum_to_discrete_laplace_noise(gamma):
    rng = np.random.RandomState(0)
    threshold, n_parties = 3, 5
    shares = np.array([discrete_laplace_share(gamma, threshold, N_DRAWS, rng)
                       for _ in range(n_parties)])
    dropped = shares[:threshold].sum(axis=0)  # two of five parties lost
    assert _chi_square_pvalue(dropped, lambda k: discrete_laplace_pmf(gamma, k)) > 1e-3
    everyone = shares.sum(axis=0)  # no party lost: shape 5/3 on each side
    assert _chi_square_pvalue(
        everyone, lambda k: _polya_difference_pmf(gamma, n_parties / threshold, k)) > 1e-3
    assert everyone.var() > dropped.var()


def test_the_pmf_is_a_distribution():
    k = np.arange(-2000, 2001)
    assert discrete_laplace_pmf(0.05, k).sum() == pytest.approx(1, abs=1e-12)


# FedKT at L1 under secure aggregation: the parties' noise, through the secure sum


def _digits_parties(n_public):
    from sklearn.datasets import load_digits

    X, y = load_digits(return_X_y=True)
    order = np.random.RandomState(0).permutation(len(y))
    X, y = X[order], y[order]
    return X[n_public:], y[n_public:], np.arange(len(y) - n_public) % 6, X[:n_public]


@pytest.mark.filterwarnings("ignore::skfedkt.LabelCollapseWarning")  # shallow trees
def test_fedkt_l1_the_summed_noise_is_the_mechanisms_and_the_server_adds_none(monkeypatch):
    """Over 10,000 noisy counts (1,000 queries x 10 classes) of a fit, the votes of
    DistributedNoise minus the plain path's (the same students, ServerNoise's noise-free
    histogram) are the sum of 6 parties' shares, sized for a threshold of 5 of which 3
    may collude (the default): shares of 2 honest parties carry the noise, so 6 make a
    Pólya difference of shape 6/2 each side. The server draws no noise, and the epsilon
    is the accountant's data-independent one."""
    from sklearn.base import clone
    from sklearn.tree import DecisionTreeClassifier

    import skfedkt
    from skfedkt import FedKTClassifier
    from skfedkt._fedkt import _plan
    from skfedkt._secure_sum import default_colluding, default_threshold
    from skfedkt.privacy import DistributedNoise, ServerNoise, data_independent_epsilon

    X, y, party, X_public = _digits_parties(1000)
    gamma = 0.5
    clf = FedKTClassifier(DecisionTreeClassifier(max_depth=4), voting="hard",
                          privacy=ServerNoise(gamma=gamma), n_teachers=2, random_state=0)
    plain = clone(clf).fit(X, y, groups=party, X_unlabeled=X_public)

    def no_server_noise(*args, **kwargs):
        raise AssertionError("the server added noise")

    monkeypatch.setattr(_plan, "add_noise", no_server_noise)
    _seeded_secret_noise(monkeypatch)
    with skfedkt.config_context(secure_aggregation=True):
        secure = clone(clf).set_params(privacy=DistributedNoise(gamma=gamma)).fit(
            X, y, groups=party, X_unlabeled=X_public)
    threshold = default_threshold(6)
    honest = threshold - default_colluding(6, threshold)
    assert (threshold, honest) == (5, 2)
    noise = (secure.vote_counts_ - plain.vote_counts_).ravel()
    assert noise.dtype.kind == "f" and (noise == np.rint(noise)).all()
    assert _chi_square_pvalue(noise.astype(np.int64),
                              lambda k: _polya_difference_pmf(gamma, 6 / honest, k)) > 1e-3
    report = secure.privacy_report_
    assert np.isnan(report.data_dependent_epsilon)
    assert secure.epsilon_ == data_independent_epsilon(
        1000, gamma=gamma, delta=1e-5, sensitivity=2 * clf.n_students)
    assert "no one sees" in report.statement


def _seeded_secret_noise(monkeypatch):
    """The parties' secret noise, seeded: a goodness-of-fit test that fails one run in
    a thousand by chance fails the same runs every time."""
    from skfedkt._fedkt import _sums

    # (seeds from 1000: with the first thousand, the fit's 10,000 counts of the noise
    # sized for colluders land in the test's one-in-a-thousand tail, p = 0.0009)
    seeds = iter(range(1000, 10 ** 6))
    monkeypatch.setattr(_sums, "secret_noise_source",
                        lambda: np.random.default_rng(next(seeds)))


def test_fedkt_l1_noise_is_drawn_from_no_seed_the_coordinator_knows():
    """Two fits of one random_state draw different noise: each party's comes from the
    operating system."""
    from sklearn.tree import DecisionTreeClassifier

    import skfedkt
    from skfedkt import FedKTClassifier
    from skfedkt.privacy import DistributedNoise

    X, y, party, X_public = _digits_parties(200)
    clf = FedKTClassifier(DecisionTreeClassifier(max_depth=4), voting="hard",
                          privacy=DistributedNoise(gamma=0.5), n_teachers=2, random_state=0)
    with skfedkt.config_context(secure_aggregation=True):
        first, second = (clf.fit(X, y, groups=party, X_unlabeled=X_public).vote_counts_
                         for _ in range(2))
    assert not np.array_equal(first, second, equal_nan=True)


@pytest.mark.parametrize("voting", ["hard", "soft"])
def test_fedkt_l1_honest_survivors_carry_the_mechanisms_noise_against_colluders(
        voting, monkeypatch):
    """Seven parties' noisy votes through the secure sum, two of them (the most the
    default threshold allows) lost before their masked input, and two of the five
    survivors colluding with the coordinator (the default): the coordinator removes
    the colluders' shares, and the three honest survivors' carry discrete Laplace noise
    of the mechanism's parameter per vote, over 10,000 counts. Soft votes are summed in
    units of 1/2**16 vote, whose parameter makes a query 2 s gamma-DP with rounding
    counted (a gamma of 2**15 makes the parameter per unit about 0.5, which 10,000
    draws resolve)."""
    from skfedkt._engine._context import SumParties
    from skfedkt._fedkt._classifier import FedKTClassifier
    from skfedkt._fedkt._sums import noise_units, party_sums
    from skfedkt._secure_sum import (Agreement, decode_integers, default_colluding,
                                     default_threshold, encode_integers, new_identities,
                                     run_secure_sum)
    from skfedkt.privacy import DistributedNoise

    gamma = 0.5 if voting == "hard" else 2.0 ** 15
    n_queries, n_classes, n_parties = 1000, 10, 7
    threshold = default_threshold(n_parties)
    colluding = default_colluding(n_parties, threshold)
    assert (threshold, colluding) == (5, 2)
    plan = FedKTClassifier(voting=voting, privacy=DistributedNoise(gamma=gamma))._plan()
    units, parameter = noise_units(plan, n_classes)
    if voting == "hard":
        student_votes = np.zeros((plan.n_students, n_queries), dtype=np.int64)
        votes = np.zeros((n_queries, n_classes))
        votes[:, 0] = plan.n_students
    else:
        student_votes = np.full((plan.n_students, n_queries, n_classes), 1 / n_classes)
        votes = student_votes.sum(axis=0)
    parties = SumParties(tuple("abcdefg"), (10,) * n_parties, threshold, colluding)
    _seeded_secret_noise(monkeypatch)
    sums = [party_sums(plan, student_votes, np.arange(n_queries), None, n_classes,
                       parties)["noisy_votes"] for _ in range(n_parties)]
    inputs = {index: encode_integers(noisy) for index, noisy in enumerate(sums)}
    identity_keys, identities = new_identities(n_parties)
    run = run_secure_sum(Agreement(b"l1 noise in shares", tuple("abcdefg"), threshold,
                                   len(inputs[0]), identities), identity_keys, inputs,
                         drop_before={5: "masked", 6: "masked"})
    assert run.survivors == tuple(range(threshold))
    # the colluders, parties 0 and 1, know their own noisy votes
    honest = decode_integers(run.total) - sum(sums[index].ravel() for index in range(2))
    noise = honest - (threshold - colluding) * np.rint(votes * units).astype(np.int64).ravel()
    assert _chi_square_pvalue(noise, lambda k: discrete_laplace_pmf(parameter, k)) > 1e-3
    # the discrete Laplace's epsilon per query: a party moves a row by at most this
    sensitivity = 2 * plan.n_students * units + (n_classes if voting == "soft" else 0)
    assert parameter * sensitivity == pytest.approx(2 * plan.n_students * gamma)
