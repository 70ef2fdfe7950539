"""FedCT under secure aggregation: each round, every party sends in a secure sum its
one-hot label counts on the public set (or its noisy teacher vote counts) and its
training accuracy; the server votes on the sums alone. No party's model leaves it: the
federation's model is one model, fitted by the server on the public rows of the last
consensus."""

from __future__ import annotations

from typing import Any

import numpy as np

from .._declarations import SecureSums
from .._engine._class_codes import ClassCodeModel
from .._engine._fitting import Task, TierJob, fit_clones
from .._engine._seeds import derived_random_state, draw_seeds
from .._engine._voting import count_votes
from ._plan import FedCTPlan, base_estimators


def _refusal(plan: FedCTPlan) -> str | None:
    if plan.n_rounds == 0:
        return ("n_rounds=0 trains local models only, which stay at their parties under "
                "it, and leaves no consensus for the federation's model to learn; set "
                "n_rounds to 1 or more")
    if isinstance(plan.estimator, (list, dict)):
        return ("a list or dict estimator gives each party its own kind of model, and "
                "under it the federation's model is one model of one estimator; pass "
                "one estimator")
    return None


def _float_bound(plan: FedCTPlan, max_rows: int) -> float:
    """The largest float a party sums: its training accuracy, or with `TeacherVotes`
    a noisy vote count, which the party clips to `FedCTPlan.vote_bound` of the most
    queries there may be."""
    votes = plan.teacher_votes
    return 1.0 if votes is None else max(1.0, plan.vote_bound(votes.n_queries))


SECURE_SUMS = SecureSums(refusal=_refusal, float_bound=_float_bound)


def party_sums(plan: FedCTPlan, shared: np.ndarray | None, accuracy: float,
               n_classes: int) -> dict[str, np.ndarray]:
    """What one party sends in sum: its training accuracy and, in a round the server
    votes on (`shared` not None), its shared labels (class codes, -1 for an
    abstention) as one-hot counts, or with `TeacherVotes` its noisy vote counts,
    clipped to `FedCTPlan.vote_bound`: the server, which sees their sum only, can no
    longer refuse a count beyond it."""
    sums = dict(training_accuracy=np.array([accuracy], dtype=np.float64))
    if shared is None:
        return sums
    if plan.teacher_votes is None:
        sums["label_counts"] = count_votes(shared[None], n_classes)
    else:
        bound = plan.vote_bound(len(shared))
        sums["vote_counts"] = np.clip(shared, -bound, bound)
    return sums


def check_sums(sums: dict[str, np.ndarray], n_parties: int) -> None:
    """Refuse what the secure sum of `n_parties` parties still shows no honest party
    sent: a public row whose summed label counts hold a negative count or more votes
    than parties (each adds at most one), or a summed training accuracy outside
    ``[0, n_parties]``."""
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
    accuracy = sums["training_accuracy"][0]
    # the fixed point of a float sum is off by far less than this margin
    if not -1e-6 <= accuracy <= n_parties + 1e-6:
        raise ValueError(f"The summed training accuracy of {n_parties} parties is "
                         f"{accuracy:.6g}, outside [0, {n_parties}]: a party sent an "
                         "accuracy outside [0, 1]; the sum does not show which.")


def summed_accuracy(sums: dict[str, np.ndarray], n_parties: int) -> float:
    """The mean of the `n_parties` parties' training accuracies, from their sum."""
    return float(sums["training_accuracy"][0]) / n_parties


def federation_model(plan: FedCTPlan, X_public: Any, last: np.ndarray, n_classes: int,
                     root: int) -> ClassCodeModel:
    """The federation's model under secure aggregation: a seeded clone of the base
    estimator, fitted on the public rows with a consensus code in `last` (-1: none)."""
    labelled = np.flatnonzero(last >= 0)
    if not labelled.size:
        raise ValueError(
            "No public row has a consensus label after the last round, and under "
            "secure_aggregation the federation's model learns that consensus alone: "
            "use more public rows or, with privacy, a larger epsilon (less noise).")
    (estimator,) = base_estimators(plan.estimator)
    (model,) = fit_clones(
        [Task(estimator, last[labelled], labelled, name="the federation's model")],
        TierJob(X_public, n_classes), draw_seeds(derived_random_state(root, "final"), 1),
        tier="final model", **plan.clone_fitting,
    ).models
    return model
