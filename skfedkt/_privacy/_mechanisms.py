"""The noise mechanisms the federated estimators take as their ``privacy`` parameter.

Each is a small parameter object, settable in a search as ``privacy__gamma``; an
estimator without one (``privacy=None``) adds no noise and guarantees nothing.
"""

from numbers import Real

from sklearn.base import BaseEstimator
from sklearn.utils._param_validation import Interval, StrOptions


class _VoteNoise(BaseEstimator):
    """Noise on FedKT's vote counts at one tier; `level` names the tier."""

    level = None

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
{_PARAMETERS}
    Examples
    --------
    >>> from skfedkt import FedKTClassifier
    >>> from skfedkt.privacy import PartyNoise
    >>> FedKTClassifier(privacy=PartyNoise(gamma=0.2, noise="gaussian"))
    FedKTClassifier(privacy=PartyNoise(gamma=0.2, noise='gaussian'))
    """

    level = "L2"


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

    _parameter_constraints = {
        "epsilon": [Interval(Real, 0, None, closed="neither")],
        "sensitivity": [Interval(Real, 0, None, closed="neither"), None],
        "delta": [Interval(Real, 0, 1, closed="neither")],
    }

    def __init__(self, epsilon, *, sensitivity=None, delta=1e-5):
        self.epsilon = epsilon
        self.sensitivity = sensitivity
        self.delta = delta
