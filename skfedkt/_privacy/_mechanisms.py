"""The noise mechanisms the federated estimators take as their ``privacy`` parameter.

Each is a small parameter object, settable in a search as ``privacy__gamma``; an
estimator without one (``privacy=None``) adds no noise and guarantees nothing.
"""

from numbers import Integral, Real
from typing import ClassVar

import numpy as np
from sklearn.base import BaseEstimator

from .._engine._compat import Interval, StrOptions
from ._reports import BitFlipPrivacyReport, PrivacyReport, TeacherVotesPrivacyReport


class _VoteNoise(BaseEstimator):
    """Noise on FedKT's vote counts at one tier; `level` names the tier."""

    # the tier each mechanism adds its noise at: "L1" (the server) or "L2" (the parties)
    level: ClassVar[str]

    # what a fitted model that used it holds: model files trust it (`load_model`)
    fitted_types = (PrivacyReport,)

    _parameter_constraints = {
        "gamma": [Interval(Real, 0, None, closed="neither")],
        "noise": [StrOptions({"laplace", "gaussian"})],
        "query_fraction": [Interval(Real, 0, 1, closed="right")],
        "delta": [Interval(Real, 0, 1, closed="neither")],
    }

    def __init__(self, gamma=0.05, *, noise="laplace", query_fraction=1.0, delta=1e-5):
        self.gamma = gamma
        self.noise = noise
        self.query_fraction = query_fraction
        self.delta = delta


_PARAMETERS = """
    Parameters
    ----------
    gamma : float, default=0.05
        Inverse scale of the noise: the Laplace scale, or the Gaussian standard
        deviation, is ``1/gamma``; larger means less noise and a larger epsilon.
    noise : {"laplace", "gaussian"}, default="laplace"
        ``"laplace"`` is the paper's: each query is ``2 s gamma``-DP (server noise, for
        ``s`` students per party) or ``2 gamma``-DP (party noise), composed by the
        data-dependent moments accountant and data-independent bounds, the smaller
        reported. ``"gaussian"`` (GNMax, Papernot et al. 2018) is ``mu``-Gaussian DP per
        query with ``mu = sqrt(2) s gamma`` or ``sqrt(2) gamma``, and queries compose
        exactly (`skfedkt.privacy.gaussian_epsilon`): the epsilon depends on no vote, so
        it may be published; the data-dependent Renyi-DP bound
        (`skfedkt.privacy.gnmax_epsilon`) is reported beside it. For many queries it
        spends less privacy for the same noise.
    query_fraction : float in (0, 1], default=1.0
        Fraction of the public set that the noisy tier labels; the other public
        examples are not used by that tier. Fewer queries cost less privacy.
    delta : float in (0, 1), default=1e-5
        The delta of the reported (epsilon, delta) guarantee.
"""


class ServerNoise(_VoteNoise):
    __doc__ = f"""Noise on the server's vote counts: FedKT's privacy level L1.

    Noise is added to every count of the server's histogram of the students' votes, so
    the final model is differentially private at the *party* level (sensitivity
    ``2 * n_students``: one party moves all its students' votes). The students the
    parties upload are not covered.
{_PARAMETERS}
    Examples
    --------
    >>> from skfedkt import FedKTClassifier
    >>> from skfedkt.privacy import ServerNoise
    >>> FedKTClassifier(privacy=ServerNoise(gamma=0.5, query_fraction=0.2))
    FedKTClassifier(privacy=ServerNoise(gamma=0.5, query_fraction=0.2))
    """

    level = "L1"


class PartyNoise(_VoteNoise):
    __doc__ = f"""Noise on every party's teacher vote counts: FedKT's privacy level L2.

    Noise is added to every count of every teacher vote histogram of every partition of
    every party, so every student, and hence the final model, is differentially private
    at the *example* level, even towards the server. Each party's noise comes from its
    own secret ``party_seed`` in a deployment.
{_PARAMETERS}    counts_gamma : float, "gamma" or None, default="gamma"
        Inverse scale of the noise (the same kind as `noise`) on the class counts each
        party releases beside its students when the server pools soft votes: with them
        the server corrects the votes for the parties' class mixes and keeps the final
        labels at the training rows' class shares (``SoftVotes``'s "auto" parts), so the
        final model does not collapse to the majority class. One example moves two
        counts by one (sensitivity 2 in L1 norm, ``sqrt(2)`` in L2 norm), as it moves a
        vote: with ``"gamma"`` (the votes' own `gamma`) the counts cost what one more
        vote histogram costs. The release is composed into every party's epsilon; the
        noisy counts are rounded to non-negative integers summing to the party's rows.
        ``None`` releases no counts: the server sums the votes and matches no shares.
        Hard votes release none.

    Examples
    --------
    >>> from skfedkt import FedKTClassifier
    >>> from skfedkt.privacy import PartyNoise
    >>> FedKTClassifier(privacy=PartyNoise(gamma=0.2, noise="gaussian"))
    FedKTClassifier(privacy=PartyNoise(gamma=0.2, noise='gaussian'))
    """

    level = "L2"

    _parameter_constraints = {
        **_VoteNoise._parameter_constraints,
        "counts_gamma": [Interval(Real, 0, None, closed="neither"), StrOptions({"gamma"}),
                         None],
    }

    def __init__(self, gamma=0.05, *, noise="laplace", query_fraction=1.0, delta=1e-5,
                 counts_gamma="gamma"):
        super().__init__(gamma, noise=noise, query_fraction=query_fraction, delta=delta)
        self.counts_gamma = counts_gamma


class DistributedNoise(BaseEstimator):
    """Noise the parties add in shares of a secure sum: FedKT's privacy level L1 under
    secure aggregation, where the coordinator never sees a noise-free vote.

    Each party adds to its votes on the queries its share of discrete Laplace noise
    (``P(k)`` proportional to ``exp(-gamma |k|)`` per vote): the difference of two
    Pólya draws from the operating system's random source, sized so that the shares of
    any ``t - c`` honest parties sum to the whole noise, where ``t`` is the secure
    sum's threshold and ``c`` the number of parties that may collude with the
    coordinator (the secure session's ``colluding``). The coordinator adds none and
    sees only noisy sums; the final model is differentially private at the *party*
    level, as with `ServerNoise` (sensitivity ``2 * n_students``), and the accountant
    reports the data-independent epsilon of the noise that is certain. It runs only
    under secure aggregation (``skfedkt.set_config(secure_aggregation=True)``): without
    it, pass `ServerNoise`.

    Parameters
    ----------
    gamma : float, default=0.05
        The discrete Laplace parameter per vote: larger means less noise and a larger
        epsilon, as `ServerNoise`'s `gamma`.
    query_fraction : float in (0, 1], default=1.0
        Fraction of the public set that the noisy tier labels.
    delta : float in (0, 1), default=1e-5
        The delta of the reported guarantee (the noise itself is pure DP: delta 0).

    Examples
    --------
    >>> from skfedkt import FedKTClassifier
    >>> from skfedkt.privacy import DistributedNoise
    >>> FedKTClassifier(privacy=DistributedNoise(gamma=0.5))
    FedKTClassifier(privacy=DistributedNoise(gamma=0.5))
    """

    level = "L1"
    # the only noise whose shares sum to it exactly
    noise = "laplace"

    fitted_types = (PrivacyReport,)

    _parameter_constraints = {
        "gamma": [Interval(Real, 0, None, closed="neither")],
        "query_fraction": [Interval(Real, 0, 1, closed="right")],
        "delta": [Interval(Real, 0, 1, closed="neither")],
    }

    def __init__(self, gamma=0.05, *, query_fraction=1.0, delta=1e-5):
        self.gamma = gamma
        self.query_fraction = query_fraction
        self.delta = delta


def add_noise(values, *, noise, gamma, random_state):
    """`values` with independent noise of scale ``1 / gamma`` on every entry: Laplace
    (``noise="laplace"``) or Gaussian of that standard deviation (``"gaussian"``)."""
    draw = random_state.laplace if noise == "laplace" else random_state.normal
    return values + draw(scale=1 / gamma, size=np.shape(values))


def noisy_class_counts(counts, *, gamma, noise, random_state):
    """`counts` with noise of scale ``1 / gamma`` (``"laplace"`` or ``"gaussian"``) on
    every count, post-processed to non-negative integers with the same sum.

    Examples
    --------
    >>> import numpy as np
    >>> from skfedkt._privacy._mechanisms import noisy_class_counts
    >>> released = noisy_class_counts(np.array([900, 100, 0]), gamma=0.05,
    ...                               noise="gaussian", random_state=np.random.RandomState(0))
    >>> int(released.sum()), bool((released >= 0).all())
    (1000, True)
    """
    counts = np.asarray(counts)
    noisy = np.clip(add_noise(counts, noise=noise, gamma=gamma, random_state=random_state),
                    0, None)
    total = counts.sum()
    shares = noisy / noisy.sum() if noisy.sum() > 0 else np.full(len(counts), 1 / len(counts))
    # largest remainders: the rounded counts keep the party's number of rows
    released = np.floor(shares * total).astype(int)
    remainders = shares * total - released
    released[np.argsort(-remainders, kind="stable")[: total - released.sum()]] += 1
    return released


class BitFlips(BaseEstimator):
    """Random bit flips on the labels each FedCT party shares: randomized response.

    Every party flips each bit of its one-hot label matrix independently with
    probability ``p = 1 / (1 + exp(epsilon / sensitivity))`` before sharing, which makes
    each round's release ``epsilon``-differentially private when one training example
    changes at most ``sensitivity`` bits. Rounds compose; `FedCTClassifier` reports the
    smaller of pure composition and the Rényi-DP bound of randomized responses.

    Parameters
    ----------
    epsilon : float
        The epsilon of one round's release.
    sensitivity : float, default=None
        Bits of a party's label matrix one training example may change. ``None`` means
        the worst case ``2 * len(X_unlabeled)`` (every public label flips, two bits
        each).
    delta : float in (0, 1), default=1e-5
        The delta of the composed (epsilon, delta) guarantee reported.

    Examples
    --------
    >>> from skfedkt import FedCTClassifier
    >>> from skfedkt.privacy import BitFlips
    >>> FedCTClassifier(privacy=BitFlips(5.0, sensitivity=20))
    FedCTClassifier(privacy=BitFlips(epsilon=5.0, sensitivity=20))
    """

    fitted_types = (BitFlipPrivacyReport,)

    _parameter_constraints = {
        "epsilon": [Interval(Real, 0, None, closed="neither")],
        "sensitivity": [Interval(Real, 0, None, closed="neither"), None],
        "delta": [Interval(Real, 0, 1, closed="neither")],
    }

    def __init__(self, epsilon, *, sensitivity=None, delta=1e-5):
        self.epsilon = epsilon
        self.sensitivity = sensitivity
        self.delta = delta


class TeacherVotes(BaseEstimator):
    """FedCT's labels with a sensitivity bounded by construction: each party's noisy
    vote of disjoint local teachers on a few public rows.

    Every party splits its rows into `n_teachers` disjoint parts and, in every round,
    fits one teacher on each part plus the consensus-labelled public rows. On the
    `n_queries` public rows every party is asked about (the same rows in every round,
    drawn from the shared seed), it sends its teachers' vote counts with Gaussian noise
    on every count; the server sums the parties' counts and labels a row only where the
    noisy margin of its top class clears `threshold` standard deviations of the summed
    noise. One training example is in one teacher, so it moves one vote per row: L2
    sensitivity ``sqrt(2)`` per row, whatever the model. The party's own model, which it
    keeps, learns from all its rows and the consensus, as without privacy.

    The noise is set so that the fit's ``n_queries * n_rounds`` noisy histograms
    compose exactly (Gaussian DP) to `epsilon` at `delta`; a fit that stops early
    reports the smaller epsilon of the rounds it ran.

    Parameters
    ----------
    epsilon : float
        The budget of the whole fit, for every party's training examples.
    n_teachers : int, default=10
        Teachers per party (fewer for a party with fewer rows: one row each). More
        teachers give a larger vote against the same noise, but each learns from fewer
        of the party's rows.
    n_queries : int, default=100
        Public rows the parties vote on in every round (all of them if fewer). More
        rows mean more labels and more noise on each.
    threshold : float, default=2.0
        Standard deviations of the summed noise by which a row's top class must lead
        for the server to label it. Post-processing: it costs no privacy, and keeps
        noise from labelling rows.
    delta : float in (0, 1), default=1e-5
        The delta of the guarantee.

    Examples
    --------
    >>> from skfedkt import FedCTClassifier
    >>> from skfedkt.privacy import TeacherVotes
    >>> FedCTClassifier(n_rounds=3, privacy=TeacherVotes(4.0, n_teachers=5))
    FedCTClassifier(n_rounds=3, privacy=TeacherVotes(epsilon=4.0, n_teachers=5))
    """

    fitted_types = (TeacherVotesPrivacyReport,)

    _parameter_constraints = {
        "epsilon": [Interval(Real, 0, None, closed="neither")],
        "n_teachers": [Interval(Integral, 1, None, closed="left")],
        "n_queries": [Interval(Integral, 1, None, closed="left")],
        "threshold": [Interval(Real, 0, None, closed="left")],
        "delta": [Interval(Real, 0, 1, closed="neither")],
    }

    def __init__(self, epsilon, *, n_teachers=10, n_queries=100, threshold=2.0, delta=1e-5):
        self.epsilon = epsilon
        self.n_teachers = n_teachers
        self.n_queries = n_queries
        self.threshold = threshold
        self.delta = delta
