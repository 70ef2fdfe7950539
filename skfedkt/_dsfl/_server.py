"""DS-FL's server step: what runs on the server in every round, and at the end.

`DSFLServer` averages the parties' probabilities of the public rows from their total
alone and sharpens the average into the soft labels of the next round; `finished` gives
the fitted attributes from the parties' final uploads (the parties' vote, or a model
fitted on the public rows with the last soft labels).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .._deployment._party_models import (
    check_model_upload,
    check_round_state,
    final_models,
    mean_accuracy,
)
from .._deployment._received import UploadChecker
from .._deployment._upload import PartyUpload
from .._engine._class_codes import ClassCodeModel, soft_label_rows
from .._engine._context import Message
from .._engine._fitting import Task, TierJob, fit_clones
from .._engine._seeds import derived_random_state, draw_seeds
from ._party import instructions
from ._payloads import DSFLMessage, dsfl_message, dsfl_upload
from ._plan import DSFLPlan
from ._sums import check_sums, matched_shares


def sharpened(average: np.ndarray, temperature: float) -> np.ndarray:
    """The soft labels of the parties' `average` probabilities at `temperature`: each
    row raised to ``1 / temperature`` and normalised (1 leaves it as it is; below 1
    sharpens it toward its top class, above 1 flattens it)."""
    if temperature == 1:
        return average
    with np.errstate(divide="ignore"):
        logits = np.log(average) / temperature
    weights = np.exp(logits - logits.max(axis=1, keepdims=True))
    return weights / weights.sum(axis=1, keepdims=True)


def soft_labels_changed(new: np.ndarray, old: np.ndarray | None) -> float:
    """How far the soft labels moved in a round: their mean total-variation distance
    per public row (1.0 where there were none)."""
    if old is None:
        return 1.0
    return float(0.5 * np.abs(new - old).sum(axis=1).mean())


class DSFLServer:
    """The server's step of a DS-FL round: the parties' probabilities of the public
    rows averaged (weighted by their rows), matched to the federation's class shares
    and sharpened into soft labels, and whether to go on.

    Its state between rounds travels in its message to the parties (round, soft labels,
    history, stalled rounds), so each round can run as a separate command.
    """

    def __init__(self, plan: DSFLPlan, n_public: int, n_classes: int) -> None:
        self.plan, self.n_public, self.n_classes = plan, n_public, n_classes
        # one float64 per public row and class
        self.bytes_sent = 8 * n_public * n_classes

    def round(self, uploads: Sequence[Message], message: Message | None,
              sums: dict[str, np.ndarray]) -> PartyUpload:
        """The message after the parties' uploads of the round `message` asked for,
        from the total of their `sums` alone."""
        plan = self.plan
        soft_labels, fitted = instructions(message)
        state: dict[str, Any] = (
            dict(history=[], stalled=0) if message is None else
            {key: message.manifest[key] for key in ("history", "stalled")})
        history = [dict(entry) for entry in state["history"]]
        total_weight = check_sums(sums, len(uploads))
        accuracy = mean_accuracy(sums, len(uploads))
        median = float(np.median([upload.manifest["n_rows"] for upload in uploads]))
        if fitted >= 1:  # the accuracy of the models refit on the previous soft labels
            history[fitted - 1]["train_accuracy"] = accuracy

        def reply(next_soft: np.ndarray, next_round: int, last: np.ndarray, done: bool,
                  stalled: int) -> PartyUpload:
            return PartyUpload(
                manifest=dict(round=int(next_round), done=bool(done), stalled=int(stalled),
                              history=history, median_rows=median),
                payload=dict(DSFLMessage(soft_labels=np.asarray(next_soft, dtype=np.float64),
                                         last_soft_labels=np.asarray(last, dtype=np.float64))))

        if soft_labels is None:  # round 0: no soft labels yet (none at all with n_rounds=0)
            soft_labels = np.full((self.n_public, self.n_classes), 1 / self.n_classes)
        averaged = sums.get("probabilities")
        if averaged is None:  # the last of n_rounds, voted on by the parties' models
            return reply(soft_labels, fitted, soft_labels, True, state["stalled"])
        average = averaged / total_weight
        if plan.match_shares:
            counts = sums["class_counts"]
            average = matched_shares(average, counts / counts.sum())
        new = sharpened(average, plan.temperature)
        if fitted == plan.n_rounds:  # a distilled model learns the final models' average
            return reply(soft_labels, fitted, new, True, state["stalled"])
        changed = soft_labels_changed(new, None if fitted == 0 else soft_labels)
        # the first soft labels have nothing to settle from
        stalled = state["stalled"] + 1 if fitted and changed <= plan.tol else 0
        history.append(dict(round=fitted + 1, soft_labels_changed=changed,
                            train_accuracy=None, bytes_sent=self.bytes_sent))
        plan.say(f"round {fitted + 1}: the soft labels moved {changed:.4f} (mean total "
                 "variation per public row)")
        if stalled >= plan.n_iter_no_change:
            # the models just fit already learned these soft labels: they are final
            history[-1]["train_accuracy"] = accuracy
            return reply(soft_labels, fitted, new, True, stalled)
        return reply(new, fitted + 1, new, False, stalled)


def finished(plan: DSFLPlan, uploads: Sequence[Message], message: Message,
             classes: np.ndarray, sums: dict[str, np.ndarray], X_public: Any,
             root: int) -> dict[str, Any]:
    """The fitted attributes of `DSFLClassifier`, from the parties' final `uploads`
    (each with its model, where the party sent it), the total of their `sums` and the
    server's last `message`: the parties' vote, or with ``distill=True`` a model fitted
    on the public rows with the last soft labels (`distilled`)."""
    check_sums(sums, len(uploads))
    accuracy = mean_accuracy(sums, len(uploads))
    payloads = [dsfl_upload(upload) for upload in uploads]
    local = final_models(uploads, [payload.get("model") for payload in payloads],
                         [payload.get("codes") for payload in payloads], plan.distill)
    last = np.asarray(dsfl_message(message)["last_soft_labels"])
    final = distilled(plan, X_public, last, len(classes), root) if plan.distill else None
    history = [dict(entry) for entry in message.manifest["history"]]
    if history and history[-1]["train_accuracy"] is None:
        history[-1]["train_accuracy"] = accuracy
    return dict(
        _models=local,
        _final_model=final,
        estimators_=[model.estimator for model in local if model is not None],
        **({} if final is None else dict(final_estimator_=final.estimator)),
        history_=history,
        n_rounds_=len(history),
        soft_labels_=last,
    )


def distilled(plan: DSFLPlan, X_public: Any, soft_labels: np.ndarray, n_classes: int,
              root: int) -> ClassCodeModel:
    """The final model of ``distill=True``: a seeded clone of the plan's final
    estimator, fitted on the public rows with the last soft labels (every row once per
    class, weighted by its probability)."""
    rows, labels, weights = soft_label_rows(soft_labels)
    (model,) = fit_clones(
        [Task(plan.final, labels, rows, sample_weight=weights, name="the final model")],
        TierJob(X_public, n_classes), draw_seeds(derived_random_state(root, "final"), 1),
        tier="final model", **plan.clone_fitting,
    ).models
    return model


def check_party_upload(checker: UploadChecker, plan: DSFLPlan, *, final: bool) -> None:
    """A DS-FL party's upload in the clear: its rows, its round and, in the final step,
    its model (where secure aggregation does not keep it at the party). What it shares
    is in its sums, which the base checks."""
    check_model_upload(checker, plan.n_rounds, dsfl_upload(checker.upload).get("model"),
                       final=final)


def check_server_message(checker: UploadChecker, n_public: int, n_rounds: int) -> None:
    """The server's message, as a party reads it: a distribution over the classes for
    every public row (those to learn, and the last), the round to fit and the server's
    state."""
    checker.probabilities("soft_labels", n_public)
    checker.probabilities("last_soft_labels", n_public)
    checker.number("median_rows", 0, float(2 ** 53))
    check_round_state(checker, n_rounds)
