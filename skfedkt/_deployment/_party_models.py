"""What crosses in the algorithms whose parties each keep a model over rounds on the
public set (FedCT, DS-FL), beyond what they share: the party's model in the final step
(the parties' vote needs it; a distilled model does not), its accuracy on its rows in
the sum, the server's state in its messages, and the checks of each."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .._engine._class_codes import ClassCodeModel
from .._engine._context import Message
from ._fields import InClear, InSum, nonnegative
from ._received import UploadChecker
from ._upload import UploadError


def _voted(plan: Any) -> tuple[str, str] | None:
    return None if plan.distill else ("distill=False (the parties' vote)", "distill=True")


#: the party's model in the final step, which only the parties' vote needs
MODEL_FIELDS = (
    InClear("model", "in the final step, its model (share_model)", party_only=True,
            needed_when=_voted),
    InClear("codes", "the class codes of its model's outputs", party_only=True,
            needed_when=_voted),
)

#: the party's accuracy on its rows, in the sum every round
ACCURACY = InSum("training_accuracy", "its model's accuracy on its rows", "float",
                 lambda plan, max_rows: 1.0, valid=nonnegative)

# the fixed point of a float sum is off by far less than this, per value added
SUM_MARGIN = 1e-6


def accuracy_sum(accuracy: float) -> dict[str, np.ndarray]:
    """A party's `ACCURACY` in its sums."""
    return dict(training_accuracy=np.array([accuracy], dtype=np.float64))


def mean_accuracy(sums: dict[str, np.ndarray], n_parties: int) -> float:
    """The mean of the `n_parties` parties' accuracies on their rows, from their sum;
    refused where the sum is outside ``[0, n_parties]``, which no honest parties send."""
    accuracy = sums["training_accuracy"][0]
    if not -SUM_MARGIN * n_parties <= accuracy <= n_parties * (1 + SUM_MARGIN):
        raise ValueError(f"The summed training accuracy of {n_parties} parties is "
                         f"{accuracy:.6g}, outside [0, {n_parties}]: a party sent an "
                         "accuracy outside [0, 1]; the sum does not show which.")
    return float(accuracy) / n_parties


def final_models(uploads: Sequence[Message], models: Sequence[Any],
                 codes: Sequence[Any], distill: bool) -> list[ClassCodeModel | None]:
    """The parties' final models (`models` and their `codes`, aligned with `uploads`;
    None where a party kept its model), refused where the parties' vote (not `distill`)
    lacks one, naming every party that kept it."""
    missing = [upload.manifest["party"] for upload, model in zip(uploads, models)
               if model is None]
    if missing and not distill:
        raise UploadError(
            f"Parties {missing} sent no model (share_model=False): the server cannot "
            "assemble the parties' vote without every party's model.",
            party=missing[0], field="model",
        )
    return [None if model is None else ClassCodeModel(model, model_codes)
            for model, model_codes in zip(models, codes)]


def check_model_upload(checker: UploadChecker, n_rounds: int, model: Any, *,
                       final: bool) -> None:
    """A party's upload in the clear: its rows, its round and, in the final step, its
    `model` where it sent it (refused before the server's message said done)."""
    checker.count("n_rows", positive=True)
    checker.count("round", at_most=n_rounds)
    if checker.optional_model() is None and final:
        return  # the server's last step names every party that kept its model
    if not final and model is not None:
        checker.refuse("model", "a model before the server's message said done")


def check_round_state(checker: UploadChecker, n_rounds: int) -> None:
    """The server's state in its message, as a party reads it: the round to fit, the
    rounds without change, whether it is done and the history of at most `n_rounds`
    rounds."""
    checker.count("round", at_most=n_rounds)
    checker.count("stalled")
    if not isinstance(checker.manifest("done"), bool):
        checker.refuse("done", "not true or false")
    history = checker.manifest("history")
    if not isinstance(history, list) or len(history) > n_rounds or not all(
        isinstance(entry, dict) for entry in history
    ):
        checker.refuse("history", f"not a list of at most {n_rounds} rounds")
