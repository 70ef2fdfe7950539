"""What a DS-FL party sends in the sum every round, with secure aggregation on or off:
its model's class probabilities of every public row, and its accuracy on its own rows;
the server averages their total alone, and checks what the total still shows."""

from __future__ import annotations

import numpy as np

from .._deployment._fields import InSum, rows_summing_to
from .._deployment._party_models import ACCURACY, SUM_MARGIN, accuracy_sum

SUMS = (
    ACCURACY,
    InSum("probabilities", "its model's class probabilities of the public rows",
          "float", lambda plan, max_rows: 1.0, valid=rows_summing_to(lambda plan: 1.0)),
)

# a party's probabilities are multiples of 1 / PROBABILITY_UNITS, which the fixed point
# of a secure sum (2**32 units of one at most 2**30 parties) and a float64 sum both add
# exactly: secure aggregation gives the plain fit's soft labels bit for bit
PROBABILITY_UNITS = 2 ** 20


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


def party_sums(probabilities: np.ndarray | None, accuracy: float) -> dict[str, np.ndarray]:
    """What one party sends in the sum: its accuracy on its rows and, where it releases
    them, its class probabilities of the public rows, each row a distribution in
    multiples of ``1 / PROBABILITY_UNITS`` (`in_units`)."""
    sums = accuracy_sum(accuracy)
    if probabilities is not None:
        sums["probabilities"] = in_units(np.clip(probabilities.astype(np.float64), 0, 1))
    return sums


def check_sums(sums: dict[str, np.ndarray], n_parties: int) -> None:
    """Refuse what the sum of `n_parties` parties still shows no honest party sent: a
    public row whose summed probabilities hold a negative value or do not add up to
    `n_parties`."""
    margin = SUM_MARGIN * n_parties
    summed = sums.get("probabilities")
    if summed is not None:
        wrong = np.flatnonzero((summed < -margin).any(axis=1) | (
            np.abs(summed.sum(axis=1) - n_parties) > margin * summed.shape[1]))
        if wrong.size:
            row = int(wrong[0])
            raise ValueError(
                f"The summed probabilities of {wrong.size} public row(s) are not those of "
                f"{n_parties} parties each sending one distribution per row: row {row} "
                f"holds {np.round(summed[row], 6).tolist()}. A party sent other values "
                "than its model's probabilities; the sum does not show which.")
