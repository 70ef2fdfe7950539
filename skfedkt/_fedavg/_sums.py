"""What a FedAvg party sends in the sum every round, with secure aggregation on or off:
its weights times its rows, its rows and its rows predicted right (with FedDF, its
model's class probabilities on the public set); the server averages from the total
alone. A one-shot first round (`init`) sends that algorithm's fields. The global weights
go back to every party in the clear."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .._deployment._channel import Channel
from .._deployment._fields import InSum, Validity, nonnegative, rows_summing_to
from ._plan import FedAvgPlan

# the largest magnitude of a weight a party sums (times its rows): the fixed-point
# encoding needs a bound agreed before any training, and each party enforces it
WEIGHT_BOUND = 2.0 ** 20


def _rows(plan: FedAvgPlan, max_rows: int) -> float:
    return float(max_rows)


def _weights_norm(plan: FedAvgPlan, n_rows: int) -> float | None:
    """The largest L2 norm of a party's weights times its rows: ``max_weight_norm``
    times its rows (each array's norm is within the whole weights')."""
    return None if plan.max_weight_norm is None else n_rows * plan.max_weight_norm


def _no_more(plan: FedAvgPlan, values: Any) -> str | None:
    return None


SUMS = (
    InSum("weighted_*", "its trained weights times its rows, one array per layer's "
          "coefficients and intercepts", "float",
          lambda plan, max_rows: max_rows * WEIGHT_BOUND,
          valid=Validity(_no_more, norm=_weights_norm)),
    InSum("rows", "its rows", "int", _rows, valid=nonnegative),
    InSum("correct", "its rows its model predicts right", "int", _rows, valid=nonnegative),
    InSum("proba", "with FedDF: its model's class probabilities on the public rows",
          "float", lambda plan, max_rows: 1.0, valid=rows_summing_to(lambda plan: 1.0)),
)


def channel_of(plan: FedAvgPlan) -> Channel:
    """What the parties send under `plan`: these sums and, with a one-shot first round,
    that algorithm's fields and its parties' weights."""
    if plan.init is None or plan.init_plan is None:
        return Channel(SUMS)
    first = plan.init._uploads.channel(plan.init_plan).with_plan(plan.init_plan)
    return Channel((*SUMS, *first.fields), first.party_weights, first.consistent)


def refusal(plan: FedAvgPlan, secure: bool) -> str | None:
    """Why `plan` cannot run with secure aggregation on (`secure`) or off: where its
    one-shot first round cannot."""
    if plan.init is None or plan.init_plan is None:
        return None
    why = plan.init._uploads.why_not(plan.init_plan, secure)
    return None if why is None else (f"its first round, init={type(plan.init).__name__}"
                                     f"(...), cannot: {why}")


def clipped(weights: list[np.ndarray], max_norm: float | None) -> list[np.ndarray]:
    """`weights` scaled down to an L2 norm (all arrays together) of `max_norm`, as
    distributed DP clips a party's update; as they are within it, or without a bound."""
    if max_norm is None:
        return weights
    norm = math.sqrt(sum(float(np.sum(np.square(w, dtype=float))) for w in weights))
    if norm <= max_norm:
        return weights
    return [np.asarray(w) * (max_norm / norm) for w in weights]


def party_sums(party: Any, n_rows: int, weights: list[np.ndarray], accuracy: float,
               proba: np.ndarray | None) -> dict[str, np.ndarray]:
    """What one party of `n_rows` rows sends in the sum: its trained `weights` times its
    rows (``"weighted_0"``, ... one per array), its rows and its rows predicted right
    (from its training `accuracy`), exact integers, and with FedDF its model's class
    probabilities on the public set (`proba`). Weights beyond `WEIGHT_BOUND` are refused
    before any leaves the party."""
    finite = all(np.isfinite(w).all() for w in weights)
    largest = max((float(np.abs(w).max(initial=0.0)) for w in weights), default=0.0)
    if not finite or largest > WEIGHT_BOUND:
        reached = f"reach {largest:.4g}" if finite else "are not finite"
        raise ValueError(
            f"Party {party!r}'s trained weights {reached}; FedAvg sums weights within "
            f"{WEIGHT_BOUND:g} (2**20) only: scale the features (the same transform at "
            "every party), regularise the model (a larger alpha) or lower its learning "
            "rate.")
    sums = {f"weighted_{index}": n_rows * np.asarray(w, dtype=float)
            for index, w in enumerate(weights)}
    sums.update(rows=np.array(n_rows, dtype=np.int64),
                correct=np.array(round(n_rows * accuracy), dtype=np.int64))
    if proba is not None:
        sums["proba"] = np.asarray(proba, dtype=float)
    return sums


def party_weights_of(sums: dict[str, np.ndarray]) -> list[np.ndarray]:
    """One party's trained weights, from its own `party_sums`."""
    n_arrays = sum(name.startswith("weighted_") for name in sums)
    return [sums[f"weighted_{index}"] / int(sums["rows"]) for index in range(n_arrays)]


def summed_round(sums: dict[str, np.ndarray], n_parties: int, distils: bool,
                 ) -> tuple[list[np.ndarray], float, np.ndarray | None]:
    """From the `n_parties` parties' summed `party_sums`: the average of their weights,
    weighted by their rows, their accuracy weighted likewise, and (where the server
    `distils`, FedDF) their models' mean class probabilities on the public set."""
    rows = int(sums["rows"])
    proba = sums["proba"] / n_parties if distils else None
    return party_weights_of(sums), int(sums["correct"]) / rows, proba
