"""The one-shot ensemble under secure aggregation: each party sends, in a secure sum,
its local model's votes on the public rows, whether it trained one and its class counts;
the server distils the ensemble's mean vote from the sums alone, and no local model
leaves its party."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .._declarations import SecureSums
from .._engine._class_codes import ClassCodeModel
from .._engine._compat import num_samples
from .._engine._context import Message
from .._engine._validation import parties_in_words
from ._plan import OneShotPlan


def _refusal(plan: OneShotPlan) -> str | None:
    if plan.final is None:
        return ("an ensemble that is not distilled (distill=False) predicts with the "
                "parties' models themselves, which stay at their parties under it; pass "
                "distill=True")
    if plan.selection != "all":
        return (f"selection={plan.selection!r} has the server rank the parties by what "
                "each sends alone, and under secure aggregation it sees only sums; use "
                "selection='all'")
    return None


# the largest float a party sums: a class probability of its model
SECURE_SUMS = SecureSums(refusal=_refusal, float_bound=lambda plan, max_rows: 1.0)


def party_sums(plan: OneShotPlan, model: ClassCodeModel | None, X_public: Any,
               class_counts: np.ndarray) -> dict[str, np.ndarray]:
    """What one party sends in sum: its local `model`'s votes on `X_public` (a party too
    small to train, zeros), whether it trained one, and its `class_counts`. Hard votes
    are integers, which the secure sum adds exactly."""
    n_public, n_classes = num_samples(X_public), len(class_counts)
    soft = plan.voting == "soft"
    votes = (np.zeros((n_public, n_classes)) if model is None
             else model.votes(X_public, n_classes, soft=soft))
    return dict(votes=votes if soft else votes.astype(np.int64),
                trained=np.array(model is not None, dtype=np.int64),
                class_counts=np.asarray(class_counts, dtype=np.int64))


def summed_ensemble(plan: OneShotPlan, uploads: Sequence[Message],
                    sums: dict[str, np.ndarray]) -> tuple[dict[str, Any], np.ndarray]:
    """The fitted attributes the sums allow, and the ensemble's mean vote on the public
    rows (what `_server.server_step` distils): no local model, and as trained and
    selected parties those whose rows reach ``min_samples``, as their manifests say."""
    trained = np.array([upload.manifest["party"] for upload in uploads
                        if upload.manifest["n_rows"] >= plan.min_rows])
    fitted = dict(trained_parties_=trained, selected_parties_=trained, estimators_=[],
                  _local_codes=[], _ensemble=[])
    plan.say(f"{parties_in_words(int(sums['trained']))} trained a local model; the server "
             "distils the sum of their votes")
    return fitted, sums["votes"] / int(sums["trained"])
