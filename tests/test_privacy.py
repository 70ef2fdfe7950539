"""The privacy accountant and FedKT's noisy tiers (privacy levels L1 and L2)."""

import warnings

import numpy as np
import pytest
from _data import noise_at
from numpy.testing import assert_allclose, assert_array_equal
from scipy.stats import norm
from sklearn.base import clone
from sklearn.datasets import make_classification
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split

from skfedkt import FedKTClassifier, HardVotes, SoftVotes
from skfedkt._fedkt._server import server_votes
from skfedkt._privacy._accounting import DEFAULT_ORDERS, epsilon_from_log_moments
from skfedkt._privacy._gaussian import _gnmax_log_q, _gnmax_rdp, gdp_epsilon, gnmax_log_moments
from skfedkt._privacy._mechanisms import noisy_class_counts
from skfedkt.datasets import dirichlet_partition
from skfedkt.privacy import (
    PartyNoise,
    ServerNoise,
    data_independent_epsilon,
    gaussian_epsilon,
    gaussian_sigma,
    gnmax_epsilon,
    laplace_epsilon,
    pate_epsilon,
    pate_epsilon_data_independent,
    pate_log_moments,
    unanimous_flip_probability,
)

# the server's plain sum of the votes: it uses no class counts, so no party releases them
PLAIN_SUM = SoftVotes(pooling="sum", match_shares=False)

# --- the accountant ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "vote_counts, gamma, orders, expected",
    [
        ([[10, 0]], 0.1, range(1, 9), 1.569246),
        ([[10, 0]], 0.1, range(1, 33), 0.521746),
        (np.tile([150, 100], (100, 1)), 0.05, range(1, 9), 3.663313),
        (np.tile([150, 100], (100, 1)), 0.05, range(1, 33), 3.375507),
    ],
)
def test_pate_epsilon_reference_values(vote_counts, gamma, orders, expected):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        epsilon = pate_epsilon(vote_counts, gamma=gamma, delta=1e-5, orders=orders)
    assert epsilon == pytest.approx(expected, abs=1e-6)


def test_data_independent_reference_value():
    epsilon = pate_epsilon_data_independent(100, gamma=0.05, delta=1e-5, orders=range(1, 9))
    assert epsilon == pytest.approx(5.302585, abs=1e-6)


def test_warns_when_the_largest_order_gives_the_minimum():
    with pytest.warns(UserWarning, match="largest moment order"):
        pate_epsilon([[10, 0]], gamma=0.1, delta=1e-5)


def test_data_independent_moments_ignore_the_votes():
    strong = pate_log_moments(np.tile([100, 0], (5, 1)), gamma=0.1, data_independent=True)
    split = pate_log_moments(np.tile([50, 50], (5, 1)), gamma=0.1, data_independent=True)
    assert_array_equal(strong, split)


def test_data_dependent_bound_used_only_where_valid():
    # a tie gives q = 1/2 >= 1/(exp(eps0) + 1): the bound falls back to the worst case
    tie = pate_log_moments([[5, 5]], gamma=0.1)
    worst = pate_log_moments([[5, 5]], gamma=0.1, data_independent=True)
    assert_array_equal(tie, worst)
    # strong agreement is cheaper than the worst case at every order
    assert (pate_log_moments([[50, 0]], gamma=0.1) < worst).all()


def test_laplace_epsilon_composes_and_is_tightest():
    # 100 Laplace releases, sensitivity 2, scale 20 (values checked with dp-accounting)
    assert laplace_epsilon(100, gamma=0.05, delta=1e-5) == pytest.approx(4.2203, abs=1e-3)
    assert laplace_epsilon(0, gamma=0.05, delta=1e-5) == 0.0
    assert laplace_epsilon(10, gamma=0.05, delta=1e-5) < laplace_epsilon(
        20, gamma=0.05, delta=1e-5
    )
    assert data_independent_epsilon(
        100, gamma=0.05, delta=1e-5, sensitivity=2
    ) == pytest.approx(4.2203, abs=1e-3)


# --- FedKT's noisy tiers ----------------------------------------------------------------


def _pure_parties(n_public=3000, classes=("a", "a", "b")):
    """One constant class per party: every teacher histogram is known exactly."""
    rng = np.random.RandomState(0)
    X = rng.normal(size=(40 * len(classes), 4))
    y = np.repeat(classes, 40)
    party = np.repeat(np.arange(len(classes)), 40)
    return X, y, party, rng.normal(size=(n_public, 4))


def _laplace_flip_probability(gap, gamma):
    """P[argmax flips] for two counts `gap` apart with Laplace(1/gamma) noise on each."""
    return (2 + gamma * gap) / (4 * np.exp(gamma * gap))


def test_l1_noise_flips_server_votes_at_the_laplace_rate():
    X, y, party, X_public = _pure_parties()
    clf = FedKTClassifier(n_students=1, n_teachers=2, privacy=ServerNoise(gamma=1.0),
                          random_state=0)
    clf.fit(X, y, groups=party, X_unlabeled=X_public)
    # noise-free server histogram: 2 votes for 'a', 1 for 'b' everywhere
    assert_array_equal(clf.vote_counts_, np.tile([2, 1], (3000, 1)))
    # the parties add none: their students are constant
    assert all(type(s[0]).__name__ == "DummyClassifier" for s in clf.students_)
    expected = _laplace_flip_probability(gap=1, gamma=1.0)  # 0.276
    flipped = np.mean(clf.public_labels_ == "b")
    assert flipped == pytest.approx(expected, abs=4 * np.sqrt(expected * (1 - expected) / 3000))
    assert clf.public_mask_.all()


def test_l2_noise_flips_teacher_votes_at_the_laplace_rate_and_server_adds_none():
    X, y, party, X_public = _pure_parties(classes=("a", "b"))
    clf = FedKTClassifier(n_students=1, n_teachers=4, privacy=PartyNoise(gamma=0.5),
                          voting=PLAIN_SUM, random_state=0)
    clf.fit(X, y, groups=party, X_unlabeled=X_public)
    # party 'a' has 4 teachers voting 'a' (code 0): its student learned the noisy argmax
    student = clf.students_[0][0]
    expected = _laplace_flip_probability(gap=4, gamma=0.5)  # 0.135
    flipped = np.mean(student.predict(X_public) == 1)
    assert flipped == pytest.approx(expected, abs=4 * np.sqrt(expected * (1 - expected) / 3000))
    # the server's labels are the plain plurality of its noise-free votes (ties at random)
    votes, codes = clf.vote_counts_, np.searchsorted(clf.classes_, clf.public_labels_)
    assert_array_equal(votes[np.arange(len(votes)), codes], votes.max(axis=1))


@pytest.mark.parametrize("level, n_teachers, gap", [("L1", 2, 1), ("L2", 4, 4)])
def test_gaussian_noise_flips_votes_at_its_rate_and_composes_exactly(level, n_teachers, gap):
    X, y, party, X_public = _pure_parties(**({"classes": ("a", "b")} if level == "L2" else {}))
    clf = FedKTClassifier(n_students=1, n_teachers=n_teachers,
                          privacy=noise_at(level, noise="gaussian", gamma=0.5),
                          voting=PLAIN_SUM, random_state=0)
    clf.fit(X, y, groups=party, X_unlabeled=X_public)
    if level == "L1":  # the server's histogram: 2 votes for 'a', 1 for 'b'
        flipped = np.mean(clf.public_labels_ == "b")
    else:  # party 'a''s 4 teachers vote 'a': its student learned the noisy argmax
        flipped = np.mean(clf.students_[0][0].predict(X_public) == 1)
    # two counts `gap` apart, each with N(0, 2^2) noise
    expected = norm.cdf(-gap * 0.5 / np.sqrt(2))
    assert flipped == pytest.approx(expected, abs=4 * np.sqrt(expected * (1 - expected) / 3000))
    report = clf.privacy_report_
    assert report.mechanism == "gaussian"
    assert report.sensitivity == pytest.approx(np.sqrt(2))  # one party's one student (L1)
    assert clf.epsilon_ == pytest.approx(
        gaussian_epsilon(3000, sigma=2.0, delta=1e-5, sensitivity=np.sqrt(2)))
    assert "Gaussian standard deviation 1/gamma = 2" in report.statement
    # votes this close save nothing: the data-dependent bound is the looser one, unsaid
    assert report.data_dependent_epsilon > clf.epsilon_
    assert "data-dependent" not in report.statement


@pytest.mark.filterwarnings("ignore::skfedkt.LabelCollapseWarning")  # a 19-to-1 vote
@pytest.mark.parametrize("level", ["L1", "L2"])
def test_gaussian_noise_reports_what_agreeing_votes_cost(level):
    # L1: 20 parties' students all vote their party's class, 19 to 1 on every query;
    # L2: every partition's 20 teachers vote their party's class unanimously
    classes = ("a",) * 19 + ("b",) if level == "L1" else ("a", "b")
    X, y, party, X_public = _pure_parties(n_public=500, classes=classes)
    n_teachers = 2 if level == "L1" else 20
    clf = FedKTClassifier(n_students=1, n_teachers=n_teachers,
                          privacy=noise_at(level, noise="gaussian", gamma=0.5),
                          voting=PLAIN_SUM, random_state=0)
    clf.fit(X, y, groups=party, X_unlabeled=X_public)
    report = clf.privacy_report_
    votes = [19, 1] if level == "L1" else [20, 0]
    expected = gnmax_epsilon(np.tile(votes, (500, 1)), sigma=2.0, delta=1e-5)
    assert report.data_dependent_epsilon == pytest.approx(expected)
    # the published guarantee stays the exact data-independent composition
    assert clf.epsilon_ == pytest.approx(
        gaussian_epsilon(500, sigma=2.0, delta=1e-5, sensitivity=np.sqrt(2)))
    assert report.data_dependent_epsilon < clf.epsilon_ / 10
    assert f"data-dependent epsilon of {expected:.4g}" in report.statement
    assert "not published" in report.statement


# ln q and the Renyi DP of one GNMax answer at orders 2, 3, 5, 9, 17, 33, 65, from the
# reference code of Papernot et al. (2018) (tensorflow/privacy research/pate_2018/core.py,
# compute_logq_gaussian and rdp_gaussian)
_GNMAX_REFERENCE = [
    ([90, 10], 10.0, -18.68092549266295,
     [2.1179741202592164e-08, 2.8707297652444448e-08, 7.215274158895261e-08,
      1.061312791442655e-06, 0.0005715189187478844, 0.29065265744561025, 0.65]),
    ([45, 5, 0], 5.0, -18.66825314308061,
     [7.23767798970441e-08, 1.6460210554345172e-07, 2.335085219058238e-06,
      0.001350998599522354, 0.601509268348533, 1.32, 2.6]),
    ([30, 20], 4.0, -3.255800842482071,
     [0.10988269357021244, 0.14519324396245814, 0.27645639905285957, 0.5625, 1.0625,
      2.0625, 4.0625]),
    ([200, 3, 1, 0], 40.0, -7.309163459731758,
     [0.00019376168957520952, 0.00020082587502847369, 0.00021707831363228044,
      0.0002604789084320616, 0.00042068378287486485, 0.0016452627769790646,
      0.025113421443881827]),
    ([10, 9], 1.0, -1.4281583103970297, [2.0, 3.0, 5.0, 9.0, 17.0, 33.0, 65.0]),
]


@pytest.mark.parametrize("counts, sigma, log_q, rdp", _GNMAX_REFERENCE)
def test_gnmax_renyi_dp_matches_the_reference_code(counts, sigma, log_q, rdp):
    computed_log_q = _gnmax_log_q(np.array([counts], dtype=float), sigma)
    assert computed_log_q[0] == pytest.approx(log_q, rel=1e-12)
    orders = [2, 3, 5, 9, 17, 33, 65]
    assert_allclose(_gnmax_rdp(computed_log_q, sigma, orders)[0], rdp, rtol=1e-9)


def test_gnmax_log_q_by_hand_and_the_epsilon_it_gives():
    # two classes 80 apart, sigma 10: q = P[N(0, 2 * 10^2) >= 80] = P[Z >= 5.657]
    assert _gnmax_log_q(np.array([[90.0, 10.0]]), 10.0)[0] == pytest.approx(
        norm.logsf(80 / np.sqrt(200)))
    # an answer no noise can change costs nothing, a tie costs the data-independent bound
    assert _gnmax_rdp(np.array([-np.inf]), 10.0, [2, 8])[0] == pytest.approx([0, 0])
    assert_allclose(_gnmax_rdp(_gnmax_log_q(np.array([[5.0, 5.0]]), 10.0), 10.0, [2, 8])[0],
                    [2 / 100, 8 / 100])
    # a party of s votes with noise s sigma is accounted as one voter with noise sigma
    counts = np.tile([40.0, 8.0, 2.0], (50, 1))
    assert gnmax_epsilon(3 * counts, sigma=30.0, delta=1e-5, sensitivity=3 * np.sqrt(2)) == (
        pytest.approx(gnmax_epsilon(counts, sigma=10.0, delta=1e-5)))
    # agreeing votes cost far less than the exact data-independent composition
    agreeing = np.tile([90.0, 10.0], (100, 1))
    assert gnmax_epsilon(agreeing, sigma=10.0, delta=1e-5) < gaussian_epsilon(
        100, sigma=10.0, delta=1e-5, sensitivity=np.sqrt(2)) / 3


# parties of one class each: the final model learns one class, as it should here
@pytest.mark.filterwarnings("ignore::skfedkt.LabelCollapseWarning")
def test_l0_adds_no_noise():
    X, y, party, X_public = _pure_parties()
    clf = FedKTClassifier(n_students=1, n_teachers=2, random_state=0)
    clf.fit(X, y, groups=party, X_unlabeled=X_public)
    assert_array_equal(clf.public_labels_, ["a"] * 3000)
    assert clf.epsilon_ == np.inf
    assert clf.privacy_report_.level == "L0"


@pytest.fixture(scope="module")
def many_parties():
    X, y = make_classification(n_samples=12000, n_features=10, n_informative=5,
                               random_state=0)
    X_train, X_rest, y_train, y_rest = train_test_split(X, y, train_size=0.75, random_state=0)
    X_public, X_test, _, y_test = train_test_split(X_rest, y_rest, test_size=0.5,
                                                   random_state=0)
    party = dirichlet_partition(y_train, 60, beta=0.5, random_state=0)
    return X_train, y_train, party, X_public, X_test, y_test


def _fit(data, **params):
    X_train, y_train, party, X_public, _, _ = data
    params = {"n_students": 1, "random_state": 0, **params}
    clf = FedKTClassifier(LogisticRegression(), **params)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return clf.fit(X_train, y_train, groups=party, X_unlabeled=X_public)


@pytest.mark.parametrize("level", ["L1", "L2"])
def test_private_fit_is_reproducible(many_parties, level):
    first = _fit(many_parties, privacy=noise_at(level, gamma=0.1, query_fraction=0.02))
    again = _fit(many_parties, privacy=noise_at(level, gamma=0.1, query_fraction=0.02))
    other = _fit(many_parties, privacy=noise_at(level, gamma=0.1, query_fraction=0.02),
                 random_state=1)
    assert_array_equal(first.public_labels_, again.public_labels_)
    assert first.epsilon_ == again.epsilon_
    # another seed draws other queries and noise (and, at L2, other teacher subsets)
    assert not (np.array_equal(first.public_mask_, other.public_mask_)
                and np.array_equal(first.public_labels_, other.public_labels_))


@pytest.mark.parametrize("level", ["L1", "L2"])
def test_epsilon_grows_with_gamma_and_query_fraction(many_parties, level):
    def epsilon(gamma, query_fraction):
        privacy = noise_at(level, gamma=gamma, query_fraction=query_fraction)
        return _fit(many_parties, privacy=privacy).epsilon_

    middle = epsilon(0.05, 0.02)  # the point both series share
    by_gamma = [epsilon(0.02, 0.02), middle, epsilon(0.2, 0.02)]
    by_queries = [epsilon(0.05, 0.005), middle, epsilon(0.05, 0.05)]
    assert np.all(np.diff(by_gamma) > 0), by_gamma
    assert np.all(np.diff(by_queries) > 0), by_queries


def test_privacy_report_states_the_guarantee(many_parties):
    l1 = _fit(many_parties, privacy=ServerNoise(gamma=0.05, query_fraction=0.01),
              n_students=2)
    report = l1.privacy_report_
    assert (report.level, report.unit, report.sensitivity) == ("L1", "party", 4.0)
    assert report.n_queries == round(0.01 * 1500)
    assert report.epsilon == min(report.data_dependent_epsilon,
                                 report.data_independent_epsilon)
    assert report.data_independent_epsilon == data_independent_epsilon(
        15, gamma=0.05, delta=1e-5, sensitivity=4.0
    )
    assert l1.epsilon_ == report.epsilon
    assert "for each party" in str(report) and "leaks information" in str(report)
    assert "a moderate guarantee" in str(report)
    assert l1.public_mask_.sum() == 15

    l2 = _fit(many_parties, privacy=PartyNoise(gamma=0.2, query_fraction=0.01))
    report = l2.privacy_report_
    assert (report.level, report.unit, report.sensitivity) == ("L2", "example", 2.0)
    assert set(report.party_epsilons) == set(l2.parties_.tolist())
    assert report.epsilon == max(report.party_epsilons.values())
    assert all(eps <= report.data_independent_epsilon
               for eps in report.party_epsilons.values())


def test_private_fedkt_stays_accurate(many_parties):
    *_, X_test, y_test = many_parties
    l0 = _fit(many_parties).score(X_test, y_test)
    # 60 parties, 30 queries, soft votes; measured: L0 0.859, L1 (epsilon 3.8) and L2
    # (epsilon 9.5) below; over 3 seeds L0 0.839, L1 0.792, L2 0.722 (hard votes: 0.837,
    # 0.780 at epsilon 4.3, 0.728)
    l1 = _fit(many_parties, privacy=ServerNoise(gamma=0.1, query_fraction=0.02))
    l2 = _fit(many_parties, privacy=PartyNoise(gamma=0.2, query_fraction=0.02))
    assert l1.epsilon_ < 5 and l1.score(X_test, y_test) > l0 - 0.06
    assert l2.epsilon_ < 12 and l2.score(X_test, y_test) > l0 - 0.13


def test_l1_releases_the_histogram_without_the_consistent_voting_fallback():
    # no party unanimous anywhere: L0 falls back to every student's vote, but at L1
    # that data-dependent switch would leak, so the empty histogram is released
    disagreeing = np.array([[[0, 1], [1, 0]], [[1, 0], [0, 1]]])
    with pytest.warns(UserWarning, match="consistent voting leaves nothing"):
        server_votes(HardVotes(), disagreeing, 2)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        votes = server_votes(HardVotes(), disagreeing, 2, warn_if_empty=False)
    assert_array_equal(votes, np.zeros((2, 2)))


@pytest.mark.parametrize("n_releases, sigma, sensitivity", [
    (1, 2.0, np.sqrt(2)), (81, 25.0, np.sqrt(2)), (320, 30.0, 2 * np.sqrt(2)), (5000, 100.0, 1.0),
])
def test_gaussian_composition_matches_dp_accountings_pld(n_releases, sigma, sensitivity):
    dp_accounting = pytest.importorskip("dp_accounting")
    from dp_accounting.pld import PLDAccountant

    accountant = PLDAccountant()
    accountant.compose(dp_accounting.GaussianDpEvent(sigma / sensitivity), n_releases)
    assert gaussian_epsilon(n_releases, sigma=sigma, delta=1e-5, sensitivity=sensitivity) == (
        pytest.approx(accountant.get_epsilon(1e-5), rel=1e-6)
    )


def test_mixed_gaussian_releases_compose_as_dp_accountings_pld():
    # a party's 300 vote releases and its one count release of another noise
    dp_accounting = pytest.importorskip("dp_accounting")
    from dp_accounting.pld import PLDAccountant

    accountant = PLDAccountant()
    accountant.compose(dp_accounting.GaussianDpEvent(25.0 / np.sqrt(2)), 300)
    accountant.compose(dp_accounting.GaussianDpEvent(20.0 / np.sqrt(2)))
    mu = np.sqrt(2) * np.hypot(np.sqrt(300) / 25.0, 1 / 20.0)
    assert gdp_epsilon(mu, delta=1e-5) == pytest.approx(accountant.get_epsilon(1e-5), rel=1e-6)


@pytest.mark.parametrize("n_releases, epsilon", [(1, 1.0), (100, 4.0), (2000, 8.0)])
def test_gaussian_sigma_spends_the_budget_by_dp_accountings_pld(n_releases, epsilon):
    dp_accounting = pytest.importorskip("dp_accounting")
    from dp_accounting.pld import PLDAccountant

    sigma = gaussian_sigma(n_releases, epsilon=epsilon, delta=1e-5, sensitivity=np.sqrt(2))
    accountant = PLDAccountant()
    accountant.compose(dp_accounting.GaussianDpEvent(sigma / np.sqrt(2)), n_releases)
    assert accountant.get_epsilon(1e-5) == pytest.approx(epsilon, rel=1e-5)


def test_unanimous_flip_probability():
    # two classes: the noisy difference of the counts is normal with sd sigma sqrt(2)
    assert unanimous_flip_probability(10, 2, 7.0) == pytest.approx(
        norm.cdf(-10 / (7.0 * np.sqrt(2))))
    rng = np.random.RandomState(0)
    noisy = np.array([5.0, 0.0, 0.0, 0.0]) + rng.normal(0, 3.0, (200_000, 4))
    assert unanimous_flip_probability(5, 4, 3.0) == pytest.approx(
        np.mean(noisy.argmax(axis=1) != 0), abs=0.005)
    assert unanimous_flip_probability(5, 2, 1e-3) == pytest.approx(0.0, abs=1e-12)


def test_noisy_class_counts_keep_the_rows_and_their_noise_level():
    rng = np.random.RandomState(0)
    released = np.array([noisy_class_counts(np.array([700, 300, 0]), gamma=0.1,
                                            noise="gaussian", random_state=rng)
                         for _ in range(2000)])
    assert (released.sum(axis=1) == 1000).all() and (released >= 0).all()
    # noise of standard deviation 10 on each count, a little less after the rescaling
    assert 7 < released[:, 0].std() < 11
    assert released[:, 0].mean() == pytest.approx(695, abs=5)


@pytest.mark.filterwarnings("ignore::skfedkt.LabelCollapseWarning")
@pytest.mark.parametrize("noise", ["laplace", "gaussian"])
def test_l2_count_release_is_composed_into_every_partys_epsilon(noise):
    X, y, party, X_public = _pure_parties(n_public=200, classes=("a", "b"))
    fitted = {
        counts_gamma: FedKTClassifier(
            n_students=1, n_teachers=4, privacy=PartyNoise(0.5, noise=noise,
                                                           counts_gamma=counts_gamma),
            random_state=0).fit(X, y, groups=party, X_unlabeled=X_public)
        for counts_gamma in (None, 0.1)
    }
    quiet, counted = fitted[None].privacy_report_, fitted[0.1].privacy_report_
    assert "class counts" not in quiet.statement
    assert "class counts with noise of scale 1/counts_gamma = 10" in counted.statement
    assert_array_equal(fitted[0.1].class_shares_["training"].sum(), 1.0)
    if noise == "laplace":  # pure 2 * counts_gamma, added
        assert counted.epsilon == pytest.approx(quiet.epsilon + 0.2)
        assert counted.data_independent_epsilon == pytest.approx(
            quiet.data_independent_epsilon + 0.2)
    else:  # one more Gaussian release, composed exactly and as Renyi DP
        assert counted.epsilon == pytest.approx(
            gdp_epsilon(np.sqrt(2) * np.hypot(np.sqrt(200) * 0.5, 0.1), delta=1e-5))
        votes = np.tile([4, 0], (200, 1))
        # Renyi DP of order l + 1 of the counts: (l + 1) * sqrt(2)^2 / (2 * 10^2)
        orders = np.asarray(DEFAULT_ORDERS, dtype=float)
        moments = (gnmax_log_moments(votes, sigma=2.0) + orders * (orders + 1) * 0.1**2)
        assert counted.data_dependent_epsilon == pytest.approx(
            epsilon_from_log_moments(moments, delta=1e-5))


def test_l2_counts_keep_the_final_model_off_the_majority_class():
    # skewed parties whose noisy teachers mostly vote their own majority: summed, the
    # votes lose the minority class; released counts let the server restore its share
    X, y = make_classification(2400, n_features=8, n_informative=5, weights=[0.75],
                               random_state=0)
    X_train, X_public, y_train, _ = train_test_split(X, y, test_size=600, random_state=0)
    party = dirichlet_partition(y_train, 6, beta=0.5, min_party_size=40, random_state=0)
    shares = {}
    for counts_gamma in (None, 0.05):
        clf = FedKTClassifier(LogisticRegression(), n_teachers=10,
                              privacy=PartyNoise(0.3, noise="gaussian",
                                                 counts_gamma=counts_gamma),
                              random_state=0)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            clf.fit(X_train, y_train, groups=party, X_unlabeled=X_public)
        shares[counts_gamma] = clf.class_shares_["final"][1]
    assert clf.voting_.pooling == "prior-corrected" and clf.voting_.match_shares
    assert shares[None] < 0.1
    assert shares[0.05] == pytest.approx(np.mean(y_train), abs=0.05)


def test_the_noise_is_one_parameter_settable_in_a_search():
    clf = FedKTClassifier(privacy=ServerNoise(gamma=0.1))
    clf.set_params(privacy__gamma=0.3, privacy__query_fraction=0.5)
    assert clf.get_params()["privacy__gamma"] == 0.3
    copy = clone(clf)
    assert copy.privacy is not clf.privacy and copy.privacy.get_params() == {
        "gamma": 0.3, "noise": "laplace", "query_fraction": 0.5, "delta": 1e-5}
    assert (ServerNoise.level, PartyNoise.level) == ("L1", "L2")


@pytest.mark.parametrize("privacy, message", [
    ("L1", r"'privacy' parameter of FedKTClassifier must be an instance of"),
    (ServerNoise(gamma=-1.0), r"'gamma' parameter of ServerNoise must be a float in"),
    (PartyNoise(noise="uniform"), r"'noise' parameter of PartyNoise must be a str among"),
    (PartyNoise(query_fraction=0), r"'query_fraction' parameter of PartyNoise"),
])
def test_a_bad_mechanism_is_refused_before_any_fit(privacy, message):
    X, y, party, X_public = _pure_parties()
    with pytest.raises(ValueError, match=message):
        FedKTClassifier(privacy=privacy).fit(X, y, groups=party, X_unlabeled=X_public)


def test_fedct_bit_flips_are_one_parameter():
    from skfedkt import FedCTClassifier
    from skfedkt.privacy import BitFlips

    clf = FedCTClassifier(privacy=BitFlips(2.0)).set_params(privacy__sensitivity=8)
    assert clf.privacy.get_params() == {"epsilon": 2.0, "sensitivity": 8, "delta": 1e-5}
    X, y, party, X_public = _pure_parties()
    with pytest.raises(ValueError, match="'epsilon' parameter of BitFlips must be a float"):
        clone(clf).set_params(privacy__epsilon=0).fit(X, y, groups=party,
                                                      X_unlabeled=X_public)
