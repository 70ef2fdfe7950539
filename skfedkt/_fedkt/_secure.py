"""FedKT under secure aggregation: each party sends, in a secure sum, its students'
votes on the public rows and its class counts; the server labels the public rows from
the sums alone, and no student leaves its party."""

from __future__ import annotations

from typing import Any

import numpy as np

from .._declarations import SecureSums
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
    if plan.pooling == "prior-corrected":
        return ("the prior-corrected pooling of soft votes is not computed from sums yet; "
                "use voting=SoftVotes(pooling='sum') or voting='hard'")
    return None


SECURE_SUMS = SecureSums(refusal=_refusal,
                         # a party's students add at most one probability each per row
                         float_bound=lambda plan: float(plan.n_students))


def party_sums(plan: FedKTPlan, student_votes: np.ndarray, class_counts: np.ndarray,
               n_classes: int) -> dict[str, Any]:
    """What one party sends in sum: its students' votes (`student_votes`, shape
    (n_students, n_rows) of class codes or (n_students, n_rows, n_classes) of
    probabilities) as the server counts them, and its class counts."""
    sums: dict[str, Any] = dict(class_counts=np.asarray(class_counts, dtype=np.int64))
    if plan.soft_votes:
        sums["votes"] = student_votes.sum(axis=0, dtype=np.float64)
    else:
        every, consistent = hard_vote_counts(student_votes[None], n_classes,
                                             plan.votes.consistent)
        sums["votes"] = every.astype(np.int64)
        if consistent is not None:
            sums["consistent"] = consistent.astype(np.int64)
    return sums


def summed_votes(plan: FedKTPlan, sums: dict[str, np.ndarray]) -> np.ndarray:
    """The histogram the server labels with, from the parties' summed votes."""
    if plan.soft_votes:
        return sums["votes"]
    return chosen_hard_votes(sums["votes"], sums.get("consistent"))
