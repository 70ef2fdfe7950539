"""The privacy reports a fitted private estimator keeps: what it guarantees, how it was
computed, and the guarantee's strength in words.
"""

from dataclasses import dataclass, field

import numpy as np

from ._accounting import DEFAULT_ORDERS


def guarantee_strength(epsilon):
    """How much an epsilon protects, in words, for the statements of the reports.

    An (epsilon, delta) guarantee bounds by ``exp(epsilon)`` how much likelier any
    outcome can become with or without the protected unit; the words follow that
    factor.

    Parameters
    ----------
    epsilon : float

    Returns
    -------
    words : str

    Examples
    --------
    >>> from skfedkt.privacy import guarantee_strength
    >>> guarantee_strength(0.5)
    'a strong guarantee: no outcome becomes more than 1.65 times likelier'
    >>> guarantee_strength(77)
    'a guarantee in name only: a factor of e^77 on how likely an outcome is bounds nothing'
    """
    factor = float(np.exp(min(epsilon, 10.0)))
    if epsilon <= 1:
        return f"a strong guarantee: no outcome becomes more than {factor:.3g} times likelier"
    if epsilon <= 10:
        return (f"a moderate guarantee: no outcome becomes more than {factor:.3g} times "
                "likelier")
    return (f"a guarantee in name only: a factor of e^{epsilon:.3g} on how likely an "
            "outcome is bounds nothing")


@dataclass(frozen=True)
class PrivacyReport:
    """What a fitted private estimator guarantees, and how it was computed.

    Attributes
    ----------
    level : {"L0", "L1", "L2"}
        FedKT's privacy level.
    unit : {"party", "example"} or None
        Whose participation the guarantee protects (None at L0).
    gamma, delta : float or None
        Laplace inverse scale and failure probability.
    sensitivity : float or None
        L1 sensitivity of one noisy histogram for that unit.
    n_queries : int
        Noisy-argmax queries per noisy histogram tier (per partition at L2).
    data_dependent_epsilon : float
        From the noise-free votes: the moments accountant of Papernot et al. (2017)
        with Laplace noise, the Renyi-DP bound of GNMax (`gnmax_epsilon`) with Gaussian
        noise; NaN where the whole noisy histogram is released (soft labels). Not for
        publication: it is computed from private votes.
    data_independent_epsilon : float
        The smaller of the moments bound with ``q = 1`` and dp-accounting's PLD bound.
    epsilon : float
        The guarantee: the smaller valid bound (per party first at L2, then the maximum
        over parties). ``inf`` at L0.
    party_epsilons : dict or None
        At L2, each party's epsilon (its partitions compose); the model's epsilon is the
        maximum over parties (parallel composition, FedKT's Theorem 4).
    orders : tuple of float
        Moment orders used.
    statement : str
        The guarantee in words, with its caveats.
    mechanism : {"laplace", "gaussian"}
        The noise on the counts; with ``"gaussian"``, `sensitivity` is an L2 norm and
        `epsilon` the exact composition of Gaussian mechanisms.
    """

    level: str
    unit: str | None
    gamma: float | None
    delta: float | None
    sensitivity: float | None
    n_queries: int
    data_dependent_epsilon: float
    data_independent_epsilon: float
    epsilon: float
    party_epsilons: dict | None = None
    orders: tuple = field(default=DEFAULT_ORDERS)
    statement: str = ""
    mechanism: str = "laplace"

    def __str__(self):
        return self.statement


@dataclass(frozen=True)
class BitFlipPrivacyReport:
    """The guarantee of federated co-training with bit-flip (XOR) noise on shared labels.

    Attributes
    ----------
    epsilon_per_round : float
        Pure epsilon of one round's release by one party.
    sensitivity : float
        Bits of a party's one-hot label matrix that one training example may change.
    flip_probability : float
        Probability with which every shared bit is flipped.
    n_rounds : int
        Rounds in which labels were shared.
    delta : float
        Failure probability of `rdp_epsilon`.
    pure_epsilon : float
        ``n_rounds * epsilon_per_round`` (pure composition, delta = 0).
    rdp_epsilon : float
        Composition of all per-bit randomized responses by dp-accounting's RDP accountant.
    epsilon : float
        The smaller of the two (with `delta` when it is `rdp_epsilon`).
    statement : str
        The guarantee in words.
    """

    epsilon_per_round: float
    sensitivity: float
    flip_probability: float
    n_rounds: int
    delta: float
    pure_epsilon: float
    rdp_epsilon: float
    epsilon: float
    statement: str = ""

    def __str__(self):
        return self.statement


@dataclass(frozen=True)
class TeacherVotesPrivacyReport:
    """The guarantee of federated co-training with `TeacherVotes`: every party's
    Gaussian-noised vote counts of its disjoint teachers on the queried public rows.

    Attributes
    ----------
    sigma : float
        Standard deviation of the noise on every count.
    n_queries : int
        Public rows queried in every round.
    n_rounds : int
        Rounds in which vote counts were shared.
    n_releases : int
        ``n_queries * n_rounds`` noisy histograms per party, each of L2 sensitivity
        ``sqrt(2)`` (one example is in one teacher, which moves one vote).
    flip_probability : float
        Probability that the noise turns a row on which all of a party's teachers agree
        to another class (with ``n_teachers`` teachers), a measure of what is left of
        the signal.
    delta : float
        Failure probability.
    epsilon : float
        The exact composition of the `n_releases` histograms (Gaussian DP) at `delta`.
    statement : str
        The guarantee in words.
    """

    sigma: float
    n_queries: int
    n_rounds: int
    n_releases: int
    flip_probability: float
    delta: float
    epsilon: float
    statement: str = ""

    def __str__(self):
        return self.statement
