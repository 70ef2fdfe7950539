"""What a FedCT party sends in the sum every round, with secure aggregation on or off:
its labels of the public rows as one-hot counts (or its teachers' noisy vote counts),
and its training accuracy; the server votes on their total alone, and checks what the
total still shows."""

from __future__ import annotations

import numpy as np

from .._deployment._fields import InSum, one_hot_rows
from .._deployment._party_models import ACCURACY, accuracy_sum
from .._engine._voting import count_votes
from ._plan import FedCTPlan


def _vote_bound(plan: FedCTPlan, max_rows: int) -> float:
    votes = plan.teacher_votes
    return 1.0 if votes is None else max(1.0, plan.vote_bound(votes.n_queries))


SUMS = (
    ACCURACY,
    InSum("label_counts", "its (bit-flipped) labels of the public rows, one-hot (none "
          "where it abstains)", "int", lambda plan, max_rows: 1.0, valid=one_hot_rows),
    InSum("vote_counts", "with TeacherVotes: its teachers' noisy vote counts on the "
          "queries, clipped", "float", _vote_bound),
)


def party_sums(plan: FedCTPlan, shared: np.ndarray | None, accuracy: float,
               n_classes: int) -> dict[str, np.ndarray]:
    """What one party sends in the sum: its training accuracy and, in a round the
    server votes on (`shared` not None), its shared labels (class codes, -1 for an
    abstention) as one-hot counts, or with `TeacherVotes` its noisy vote counts,
    clipped to `FedCTPlan.vote_bound`."""
    sums = accuracy_sum(accuracy)
    if shared is None:
        return sums
    if plan.teacher_votes is None:
        sums["label_counts"] = count_votes(shared[None], n_classes)
    else:
        bound = plan.vote_bound(len(shared))
        sums["vote_counts"] = np.clip(shared, -bound, bound)
    return sums


def check_sums(sums: dict[str, np.ndarray], n_parties: int) -> None:
    """Refuse what the sum of `n_parties` parties still shows no honest party sent: a
    public row whose summed label counts hold a negative count or more votes than
    parties (each adds at most one)."""
    counts = sums.get("label_counts")
    if counts is not None:
        totals = counts.sum(axis=1)
        wrong = np.flatnonzero((counts < 0).any(axis=1) | (totals > n_parties))
        if wrong.size:
            row = int(wrong[0])
            raise ValueError(
                f"The summed label counts of {wrong.size} public row(s) are not those of "
                f"{n_parties} parties casting at most one vote each: row {row} holds "
                f"{counts[row].tolist()}. A party sent counts other than its one-hot "
                "labels; the sum does not show which.")
