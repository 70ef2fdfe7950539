"""FedKT under secure aggregation: each party sends, in a secure sum, its students'
votes on the public rows and its class counts; the server labels the public rows from
the sums alone, and no student leaves its party."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .._declarations import SecureSums
from .._engine._voting import (
    bounded_party_counts,
    prior_corrected_from_sums,
    prior_corrected_terms,
)
from ._plan import FedKTPlan
from ._votes import chosen_hard_votes, hard_vote_counts


def _refusal(plan: FedKTPlan) -> str | None:
    if not plan.distill:
        return ("distill=False predicts with the parties' students, which stay at their "
                "parties under it; keep distill=True")
    if plan.level != "L0":
        return (f"privacy={type(plan.privacy).__name__}(...) adds noise that the "
                "parties do not add in shares yet, and its accountant reads noise-free "
                "votes; use privacy=None")
    return None


def _float_bound(plan: FedKTPlan, max_rows: int) -> float:
    """The largest float a party sums: a probability summed over its students, or a
    prior-corrected term, a log-likelihood (smoothed probabilities and class shares of
    at most `max_rows` rows: under 14 + log(rows) for up to a million classes) weighted
    by at most its rows."""
    return float(max(plan.n_students, max_rows * (14 + np.log(max_rows + 1))))


SECURE_SUMS = SecureSums(refusal=_refusal, float_bound=_float_bound)


def count_scales(n_rows: Sequence[int]) -> np.ndarray:
    """Each party's factor on its class counts: the server's bound on a party's weight
    (`bounded_party_counts`: no party above the others together, nor far above the
    median party), which each party applies itself, since the server sees only sums.
    `n_rows`: every party's rows, as the manifests say them."""
    totals = np.asarray(n_rows, dtype=float)
    return bounded_party_counts(totals[:, None])[0][:, 0] / totals


def party_sums(plan: FedKTPlan, student_votes: np.ndarray, class_counts: np.ndarray,
               n_classes: int) -> dict[str, Any]:
    """What one party sends in sum: its students' votes (`student_votes`, shape
    (n_students, n_rows) of class codes or (n_students, n_rows, n_classes) of
    probabilities) as the server counts them, and its class counts (floats: scaled by
    its `count_scales` factor, integers where none caps it)."""
    sums: dict[str, Any] = dict(class_counts=np.asarray(class_counts, dtype=np.float64))
    if plan.pooling == "prior-corrected":
        terms = prior_corrected_terms(student_votes.mean(axis=0, dtype=np.float64),
                                      class_counts)
        del terms["class_counts"]  # summed once, above
        sums.update(terms)
    elif plan.soft_votes:
        sums["votes"] = student_votes.sum(axis=0, dtype=np.float64)
    else:
        every, consistent = hard_vote_counts(student_votes[None], n_classes,
                                             plan.votes.consistent)
        sums["votes"] = every.astype(np.int64)
        if consistent is not None:
            sums["consistent"] = consistent.astype(np.int64)
    return sums


def summed_votes(plan: FedKTPlan, sums: dict[str, np.ndarray], n_parties: int) -> np.ndarray:
    """The histogram the server labels with, from the `n_parties` parties' summed
    votes: as `server_votes` makes it from their students' votes (float votes differ
    from its by the sum's fixed point and reordered arithmetic, in the last digits:
    where its votes tie exactly, the tie may break otherwise)."""
    if plan.pooling == "prior-corrected":
        return n_parties * plan.n_students * prior_corrected_from_sums(sums, n_parties)
    if plan.soft_votes:
        return sums["votes"]
    return chosen_hard_votes(sums["votes"], sums.get("consistent"))
