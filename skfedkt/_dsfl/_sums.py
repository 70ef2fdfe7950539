"""What a DS-FL party sends in the sum every round, with secure aggregation on or off:
its model's class probabilities of every public row, and its accuracy on its own rows;
the server averages their total alone, and checks what the total still shows."""

from __future__ import annotations

import numpy as np

from collections.abc import Sequence
from typing import Any

from .._deployment._fields import InSum, nonnegative, rows_summing_to
from .._deployment._party_models import ACCURACY, SUM_MARGIN, accuracy_sum
from .._engine._voting import capped_rows
from ._plan import DSFLPlan

# a party's weight in the average is a multiple of 1 / WEIGHT_UNITS: times its
# probabilities' units (`PROBABILITY_UNITS`), a multiple of 2**-30 (the sum's declared
# units), which both sums add exactly
WEIGHT_UNITS = 2 ** 10

# a party's probabilities are multiples of 1 / PROBABILITY_UNITS, which the fixed point
# of a secure sum (2**32 units of one at most 2**30 parties) and a float64 sum both add
# exactly: secure aggregation gives the plain fit's soft labels bit for bit
PROBABILITY_UNITS = 2 ** 20

SUMS = (
    ACCURACY,
    InSum("probabilities", "its model's class probabilities of the public rows, "
          "weighted by its rows", "float", lambda plan, max_rows: 1.0, weighted=True,
          valid=rows_summing_to(lambda plan: 1.0), units=PROBABILITY_UNITS * WEIGHT_UNITS),
    InSum("class_counts", "its rows of each class", "int",
          lambda plan, max_rows: float(max_rows), valid=nonnegative),
)


def in_units(probabilities: np.ndarray) -> np.ndarray:
    """`probabilities` (rows of non-negative values) as distributions in multiples of
    ``1 / PROBABILITY_UNITS``, each row summing to one exactly: every value rounded
    down, the units left over given to the values that lost the most."""
    scaled = probabilities / probabilities.sum(axis=1, keepdims=True) * PROBABILITY_UNITS
    units = np.floor(scaled)
    missing = PROBABILITY_UNITS - units.sum(axis=1, keepdims=True)
    # rank 0 for the value whose rounding lost the most
    ranks = np.argsort(np.argsort(units - scaled, axis=1, kind="stable"), axis=1)
    return (units + (ranks < missing)) / PROBABILITY_UNITS


def party_sums(probabilities: np.ndarray | None, accuracy: float,
               class_counts: np.ndarray) -> dict[str, np.ndarray]:
    """What one party sends in the sum: its accuracy on its rows, its rows of each
    class and, where it releases them, its class probabilities of the public rows, each
    row a distribution in multiples of ``1 / PROBABILITY_UNITS`` (`in_units`)."""
    sums = dict(accuracy_sum(accuracy), class_counts=class_counts.astype(np.int64))
    if probabilities is not None:
        sums["probabilities"] = in_units(np.clip(probabilities.astype(np.float64), 0, 1))
    return sums


def party_weights(plan: DSFLPlan, parties: Sequence[Any], rows: np.ndarray,
                  claimed: bool) -> np.ndarray:
    """Each party's weight in the average of the probabilities: with
    ``party_weight="rows"``, its rows (capped, `capped_rows`) over the largest party's,
    rounded up to a multiple of ``1 / WEIGHT_UNITS``; one each with ``"equal"``."""
    if plan.party_weight == "equal":
        return np.ones(len(rows))
    capped = capped_rows(parties, rows, claimed)
    return np.ceil(capped / capped.max() * WEIGHT_UNITS) / WEIGHT_UNITS


def check_sums(sums: dict[str, np.ndarray], n_parties: int) -> float:
    """The parties' total weight in the summed probabilities (what every public row of
    them adds up to: each party's distribution times its weight), refusing what the sum
    of `n_parties` parties still shows no honest party sent: a negative value, rows that
    add up to different totals or to more than `n_parties`, a negative class count."""
    margin = SUM_MARGIN * n_parties
    summed = sums.get("probabilities")
    total = np.nan
    if summed is not None:
        totals = summed.sum(axis=1)
        total = float(np.median(totals))
        wrong = np.flatnonzero((summed < -margin).any(axis=1)
                               | (np.abs(totals - total) > margin * summed.shape[1]))
        if wrong.size or not 0 < total <= n_parties + margin:
            row = int(wrong[0]) if wrong.size else 0
            raise ValueError(
                f"The summed probabilities of {max(wrong.size, 1)} public row(s) are not "
                f"those of {n_parties} parties each sending one distribution per row, "
                f"weighted by its rows: row {row} holds "
                f"{np.round(summed[row], 6).tolist()}, where the rows add up to "
                f"{total:.6g}. A party sent other values than its model's probabilities; "
                "the sum does not show which.")
    if (sums["class_counts"] < 0).any():
        raise ValueError(f"The summed class counts {sums['class_counts'].tolist()} hold a "
                         "negative count: a party sent other counts than its rows'; the "
                         "sum does not show which.")
    return total


def matched_shares(average: np.ndarray, shares: np.ndarray, n_iter: int = 50) -> np.ndarray:
    """`average` (rows of class probabilities) scaled, class by class, so that its mean
    over the rows is the federation's class `shares`, each row still a distribution
    (iterative proportional fitting): parties that hold few rows of a class shrink its
    probabilities, and the sum of their class counts says by how much. A class no row
    gives any probability stays at zero."""
    matched = average
    for _ in range(n_iter):
        mean = matched.mean(axis=0)
        matched = matched * np.divide(shares, mean, out=np.zeros_like(mean), where=mean > 0)
        totals = matched.sum(axis=1, keepdims=True)
        matched = np.divide(matched, totals, out=np.copy(average), where=totals > 0)
    return matched
