"""What a one-shot party sends in the sum, with secure aggregation on or off: its local
model's votes on the public rows (where the server distils every party's), whether it
trained one, and its class counts; the server distils the ensemble's mean vote from the
total alone."""

from __future__ import annotations

from typing import Any

import numpy as np

from .._deployment._fields import InSum, nonnegative, one_hot_rows, rows_summing_to
from .._engine._class_codes import ClassCodeModel
from .._engine._compat import num_samples
from ._plan import OneShotPlan


def _votes(plan: OneShotPlan, values: np.ndarray) -> str | None:
    """Soft votes: probabilities, or zeros from a party that trained none; hard votes:
    one-hot rows."""
    if plan.voting == "hard":
        return one_hot_rows(plan, values)
    totals = values.sum(axis=-1)
    if (values < 0).any() or not (np.isclose(totals, 1.0, rtol=0, atol=1e-4).all()
                                  or (totals == 0).all()):
        return "rows that are not probabilities (or all zeros, from a party without a model)"
    return None


SUMS = (
    InSum("votes", "where the server distils every party's model: its model's votes on "
          "the public rows (probabilities, or one-hot hard votes)", "float",
          lambda plan, max_rows: 1.0,
          valid=rows_summing_to(lambda plan: 1.0, at_most=True, check=_votes)),
    InSum("trained", "whether it trained a model", "int", lambda plan, max_rows: 1.0,
          valid=nonnegative),
    InSum("class_counts", "its rows of each class", "int", lambda plan, max_rows: max_rows,
          valid=nonnegative),
)


def distils_every_party(plan: OneShotPlan) -> bool:
    """Whether the server distils the mean vote of every party's model, which the sum
    of their votes gives (``distill=True`` and ``selection="all"``)."""
    return plan.final is not None and plan.selection == "all"


def party_sums(plan: OneShotPlan, model: ClassCodeModel | None, X_public: Any,
               class_counts: np.ndarray) -> dict[str, np.ndarray]:
    """What one party sends in the sum: whether it trained a `model`, its
    `class_counts`, and where the server distils every party's model, that model's
    votes on `X_public` (a party too small to train, zeros)."""
    sums: dict[str, np.ndarray] = dict(
        trained=np.array(model is not None, dtype=np.int64),
        class_counts=np.asarray(class_counts, dtype=np.int64))
    if distils_every_party(plan):
        n_public, n_classes = num_samples(X_public), len(class_counts)
        soft = plan.voting == "soft"
        sums["votes"] = (np.zeros((n_public, n_classes)) if model is None
                         else model.votes(X_public, n_classes, soft=soft).astype(float))
    return sums
