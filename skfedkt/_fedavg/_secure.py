"""FedAvg under secure aggregation: in every round each party sends, in a secure sum, its
weights times its rows, its rows and its correctly predicted rows (with FedDF, its
model's class probabilities on the public set); the server averages from the sums
alone. A one-shot first round (`init`) runs under it exactly where that algorithm does.
The global weights go back to every party in the clear, as without it."""

from __future__ import annotations

from typing import Any

import numpy as np

from .._declarations import SecureSums
from ._plan import FedAvgPlan

# the largest magnitude of a weight a party sums (times its rows): the fixed-point
# encoding needs a bound agreed before any training, and each party enforces it
WEIGHT_BOUND = 2.0 ** 20


def _refusal(plan: FedAvgPlan) -> str | None:
    if plan.init is None or plan.init_plan is None:
        return None
    first = f"its first round, init={type(plan.init).__name__}(...),"
    declared = plan.init._secure_sums
    if declared is None:
        return f"{first} declares no secure sums"
    why = declared.refusal(plan.init_plan)
    return None if why is None else f"{first} cannot: {why}"


def _float_bound(plan: FedAvgPlan, max_rows: int) -> float:
    """The largest float a party sums: a weight times its rows (FedDF's probabilities
    are at most 1), or in a one-shot first round what that algorithm sums."""
    bound = max_rows * WEIGHT_BOUND
    declared = None if plan.init is None else plan.init._secure_sums
    if declared is not None:
        bound = max(bound, declared.float_bound(plan.init_plan, max_rows))
    return bound


SECURE_SUMS = SecureSums(refusal=_refusal, float_bound=_float_bound)


def party_sums(party: Any, n_rows: int, weights: list[np.ndarray], accuracy: float,
               proba: np.ndarray | None) -> dict[str, np.ndarray]:
    """What one party of `n_rows` rows sends in sum: its trained `weights` times its rows
    (``"weighted_0"``, ... one per array), its rows and its rows predicted right (from its
    training `accuracy`), exact integers, and with FedDF its model's class
    probabilities on the public set (`proba`). Weights beyond `WEIGHT_BOUND` are refused
    before any leaves the party."""
    finite = all(np.isfinite(w).all() for w in weights)
    largest = max((float(np.abs(w).max(initial=0.0)) for w in weights), default=0.0)
    if not finite or largest > WEIGHT_BOUND:
        reached = f"reach {largest:.4g}" if finite else "are not finite"
        raise ValueError(
            f"Party {party!r}'s trained weights {reached}; secure aggregation sums "
            f"weights within {WEIGHT_BOUND:g} (2**20) only: scale the features (the same "
            "transform at every party), regularise the model (a larger alpha) or lower "
            "its learning rate.")
    sums = {f"weighted_{index}": n_rows * np.asarray(w, dtype=float)
            for index, w in enumerate(weights)}
    sums.update(rows=np.array(n_rows, dtype=np.int64),
                correct=np.array(round(n_rows * accuracy), dtype=np.int64))
    if proba is not None:
        sums["proba"] = np.asarray(proba, dtype=float)
    return sums


def summed_round(sums: dict[str, np.ndarray], n_parties: int, distils: bool,
                 ) -> tuple[list[np.ndarray], float, np.ndarray | None]:
    """From the `n_parties` parties' summed `party_sums`: the average of their weights,
    weighted by their rows, their accuracy weighted likewise, and (where the server
    `distils`, FedDF) their models' mean class probabilities on the public set."""
    rows = int(sums["rows"])
    n_arrays = sum(name.startswith("weighted_") for name in sums)
    weights = [sums[f"weighted_{index}"] / rows for index in range(n_arrays)]
    proba = sums["proba"] / n_parties if distils else None
    return weights, int(sums["correct"]) / rows, proba
