"""How FedKT's teachers and students vote: its ``voting`` parameter.

``"soft"`` and ``"hard"`` are `SoftVotes()` and `HardVotes()`; an instance sets their
parts. Each object holds only what means something for its kind of vote. Hard votes
are counted here, for the server and, under secure aggregation, for each party.
"""

import warnings
from numbers import Integral

import numpy as np
from sklearn.base import BaseEstimator

from .._engine._compat import Interval, StrOptions
from .._engine._voting import count_votes

# rows the tiers without noise label at least, by default with soft votes; measured on
# the label-skew benchmark (benchmarks/bench_label_skew.py --ablation)
MIN_PUBLIC_ROWS = 2000

_MIN_PUBLIC_ROWS_DOC = """    min_public_rows : int, default={default}
        The tiers without noise label at least this many rows: a smaller public set is
        extended by jittered copies of its rows (every row in turn, numeric columns
        plus Gaussian noise of 0.3 times the column's standard deviation on the public
        set, integer columns rounded within their range, other columns copied; sparse
        public sets are not extended). Copies near the public rows carry more of what
        the teachers know into the students, and of what the students know into the
        final model; made from the public rows and `random_state` only, they reveal
        nothing about any party. The noisy tier (the server with ``ServerNoise``, the
        parties with ``PartyNoise``) labels its queries only. ``0`` labels the public
        rows alone, as the paper does."""


class SoftVotes(BaseEstimator):
    __doc__ = f"""FedKT's soft votes, with skfedkt's correction for label skew (the default).

    Each teacher and student adds its class probabilities (a one-hot vote if it has no
    ``predict_proba``) to the histogram, so a party's model that gives a minority class
    40% still counts for it. The server then corrects the pooled votes for the parties'
    class mixes.

    Parameters
    ----------
    pooling : {{"auto", "sum", "prior-corrected"}}, default="auto"
        How the server combines the students' probabilities. ``"sum"``: it adds them.
        ``"prior-corrected"``: it corrects each party's probabilities for the party's
        own class shares and pools what remains, the evidence about the example, by
        least squares, then adds the global class shares back (user guide, "Under label
        skew"); a party that never saw a class says nothing about it instead of voting
        against it. This uses every party's class counts: allowed without a privacy
        mechanism, and with ``PartyNoise(counts_gamma=...)``, whose parties release them
        with noise. ``"auto"`` is ``"prior-corrected"`` where they may be used, else
        ``"sum"``.
    match_shares : bool or "auto", default="auto"
        If True, the server adds one offset per class to the logarithm of its pooled
        votes, so that the share of every class among the labels it gives the public
        examples is within one standard error of sampling of the class's share of the
        training rows (from the parties' class counts): forests trained on skewed
        parties rank examples well but shrink a minority class's probability toward
        their own priors. This assumes the public set comes from the population of the
        training rows, and uses the class counts, as `pooling` does. ``"auto"`` is True
        where they may be used, else False.
{_MIN_PUBLIC_ROWS_DOC.format(default=MIN_PUBLIC_ROWS)}

    Examples
    --------
    >>> from skfedkt import FedKTClassifier, SoftVotes
    >>> FedKTClassifier(voting=SoftVotes(pooling="sum", match_shares=False))
    FedKTClassifier(voting=SoftVotes(match_shares=False, pooling='sum'))
    """

    kind = "soft"

    _parameter_constraints = {
        "pooling": [StrOptions({"auto", "sum", "prior-corrected"})],
        "match_shares": ["boolean", StrOptions({"auto"})],
        "min_public_rows": [Interval(Integral, 0, None, closed="left")],
    }

    def __init__(self, *, pooling="auto", match_shares="auto",
                 min_public_rows=MIN_PUBLIC_ROWS):
        self.pooling = pooling
        self.match_shares = match_shares
        self.min_public_rows = min_public_rows


class HardVotes(BaseEstimator):
    __doc__ = f"""FedKT's hard votes: the paper's Algorithm 1 exactly.

    Each teacher and student votes for its predicted class, and the server counts the
    votes. With label skew, hard votes drift toward the majority class at every tier.

    Parameters
    ----------
    consistent : bool, default=True
        If True, a party casts its ``n_students`` votes for a class only when all its
        students predict that class, and none otherwise (the paper's consistent
        voting); if False, every student casts one vote. When no party is unanimous on
        any public example, every student's vote is counted instead, with a warning.
{_MIN_PUBLIC_ROWS_DOC.format(default=0)}

    Examples
    --------
    >>> from skfedkt import FedKTClassifier, HardVotes
    >>> FedKTClassifier(voting=HardVotes(consistent=False))
    FedKTClassifier(voting=HardVotes(consistent=False))
    """

    kind = "hard"

    _parameter_constraints = {
        "consistent": ["boolean"],
        "min_public_rows": [Interval(Integral, 0, None, closed="left")],
    }

    def __init__(self, *, consistent=True, min_public_rows=0):
        self.consistent = consistent
        self.min_public_rows = min_public_rows


def hard_vote_counts(student_votes: np.ndarray, n_classes: int,
                     consistent: bool) -> tuple[np.ndarray, np.ndarray | None]:
    """Every student's votes counted, and with `consistent` the parties' consistent
    votes (``n_students`` votes where all of a party's students agree), of
    `student_votes` of shape (n_parties, n_students, n_rows): sums over the parties."""
    every_student_votes = count_votes(
        student_votes.reshape(-1, student_votes.shape[-1]), n_classes
    )
    if not consistent:
        return every_student_votes, None
    first = student_votes[:, 0]
    unanimous = (student_votes == first[:, None]).all(axis=1)
    return every_student_votes, count_votes(
        np.where(unanimous, first, -1), n_classes, weights=student_votes.shape[1]
    )


def chosen_hard_votes(every_student_votes: np.ndarray, consistent: np.ndarray | None,
                      warn_if_empty: bool = True) -> np.ndarray:
    """The histogram the server labels with: the consistent votes (where counted), or
    every student's where no party is unanimous on any row."""
    if consistent is None:
        return every_student_votes
    if not consistent.any() and warn_if_empty:
        # at L1 the histogram is released as is: a data-dependent switch would leak
        warnings.warn(
            "No party's students agree on any public example, so consistent voting "
            "leaves nothing to learn from; counting every student's vote instead. "
            "A larger public set, more rows per teacher or fewer n_students avoid this.",
            UserWarning,
        )
        return every_student_votes
    return consistent
