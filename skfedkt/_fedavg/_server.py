"""FedAvg's server step: what runs on the server in every round, and at the end.

Functions of a frozen `FedAvgPlan`: `server_round` averages the parties' weights (from the
total of their sums) into the next round's message (FedDF then distils
the parties' models into the average on the public set; with a one-shot first round,
round 0 is that algorithm's server step, `first_round_message`), `finished` gives the
fitted attributes from the last message, and the checks say what an upload and a
message must hold.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from .._deployment._received import UploadChecker
from .._deployment._upload import SUMS, PartyUpload
from .._engine._context import Message, ServerContext
from .._engine._class_codes import ClassCodeModel
from .._engine._seeds import derived_random_state, draw_seeds
from .._engine._weights import (
    model_of,
    model_weights,
    started_model,
    train_epoch,
)
from ._payloads import FedAvgMessage, fedavg_message
from ._plan import FedAvgPlan
from ._sums import party_weights_of, summed_round

# the weight shapes of the agreed model for the agreed features (None: not agreed) and
# classes (`weight_shapes_of`)
ShapesOf = Callable[[int | None, int], list[tuple[int, ...]]]


def server_round(context: ServerContext[FedAvgPlan], uploads: Sequence[Message]) -> PartyUpload:
    """The message after the parties' uploads of the round ``context.message`` asked
    for: the average of their weights, weighted by their rows (distilled on the public
    set with FedDF), and whether training is done."""
    plan, message, classes = context.plan, context.message, context.known_classes
    if message is None and plan.init is not None:
        return first_round_message(context, uploads)
    fitted = 0 if message is None else int(message.manifest["round"])
    distils = plan.distill_epochs > 0 and len(classes) > 1  # one class: nothing to distil
    weights, accuracy, proba = summed_round(context.sums, len(uploads), distils)
    if proba is not None:
        weights = distilled_weights(plan, proba, weights, context.X_public, len(classes),
                                    derived_random_state(context.root, "distillation", fitted))
    plan.say(f"round {fitted + 1}: the parties' mean training accuracy {accuracy:.3f}")
    return round_message(plan, message, weights, dict(
        train_accuracy=accuracy, bytes_sent=weight_bytes(weights)))


def model_proba(plan: FedAvgPlan, weights: list[np.ndarray], X_public: Any,
                n_classes: int) -> np.ndarray:
    """The class probabilities on `X_public` of the model carrying `weights`."""
    return model_of(plan.estimator, weights, n_classes).predict_proba(X_public)


def round_message(plan: FedAvgPlan, message: Message | None, weights: list[np.ndarray],
                  entry: dict[str, Any]) -> PartyUpload:
    """The server's message after the round `message` asked for (round 0 without
    one): the global `weights`, the history with this round's `entry`, and whether
    training is done."""
    fitted = 0 if message is None else int(message.manifest["round"])
    history = [] if message is None else [dict(entry) for entry in message.manifest["history"]]
    history.append(dict(round=fitted + 1, **entry))
    return PartyUpload(
        manifest=dict(round=fitted + 1, done=fitted + 1 == plan.n_rounds, history=history),
        payload=dict(FedAvgMessage(weights=weights)),
    )


def distilled_weights(plan: FedAvgPlan, proba: np.ndarray, weights: list[np.ndarray],
                      X_public: Any, n_classes: int,
                      random_state: np.random.RandomState) -> list[np.ndarray]:
    """FedDF (Lin et al., 2020): the averaged model trained `distill_epochs` epochs on
    the public rows, labelled by the parties' models' mean class probabilities `proba`
    (their winning class: scikit-learn's models learn hard labels; FedDF's own
    distillation matches the probabilities)."""
    n_public = X_public.shape[0]
    labels = proba.argmax(axis=1)
    (seed,) = draw_seeds(random_state, 1)
    model = started_model(plan.estimator, X_public, labels, n_classes, int(seed), weights)
    for _ in range(plan.distill_epochs):
        train_epoch(model, X_public, labels)
    plan.say(f"distilled the parties' models on {n_public} public rows")
    return model_weights(model)


def first_round_message(context: ServerContext[FedAvgPlan],
                        uploads: Sequence[Message]) -> PartyUpload:
    """Round 0 with a one-shot first round: that algorithm's server step on the parties'
    uploads; its final model's weights start FedAvg's rounds."""
    plan = context.plan
    assert plan.init is not None and plan.init_plan is not None, "a first round's plan"
    # the agreed labels: a list in a deployed round
    classes = np.asarray(context.classes)
    fitted = plan.init._server_step(
        replace(context.with_plan(plan.init_plan), classes=classes), uploads)
    final = fitted["_final_model"]
    n_classes = len(classes)
    # a final model of fewer classes has fewer outputs (one class: a constant)
    if len(final.codes) != n_classes:
        raise ValueError(
            f"The first round's final model learned {len(final.codes)} of the "
            f"{n_classes} classes, so its weights cannot start FedAvg's rounds: give "
            "the first round a larger public set, or fit without init."
        )
    weights = model_weights(final.estimator)
    plan.say(f"round 1: {plan.init_plan.estimator_name}'s final model starts the rounds")
    return round_message(plan, None, weights, dict(
        train_accuracy=None,
        bytes_sent=max(map(_file_bytes, uploads))))


def _file_bytes(upload: Message) -> int:
    """The bytes of `upload`'s file: as it was read, or as it would be written."""
    # every upload is a PartyUpload: read from its file, or made in `fit`
    assert isinstance(upload, PartyUpload)
    return upload.n_bytes or len(upload.to_bytes())


def weight_bytes(weights: list[np.ndarray]) -> int:
    """The bytes of one party's weights in one round, as float64 arrays."""
    return int(sum(w.nbytes for w in weights))


def finished(plan: FedAvgPlan, message: Message, classes: np.ndarray,
             rounds: Sequence[Message] = (),
             last_round_uploads: Sequence[Message] = ()) -> dict[str, Any]:
    """The fitted attributes of `FedAvgClassifier` from the server's last `message`: the
    model carrying the last average of the parties' weights, the global weights of
    every round's message in `rounds`, and each party's weights in
    `last_round_uploads`, the uploads of the last round (those `fit` saw; a deployed
    server has its last message alone)."""
    n_classes = len(classes)
    model = model_of(plan.estimator, fedavg_message(message)["weights"], n_classes)
    history = [dict(entry) for entry in message.manifest["history"]]
    # a one-shot first round's uploads carry that algorithm's fields, not weights; under
    # secure aggregation the uploads carry no sums the server sees
    averaged = last_round_uploads if plan.init is None or len(rounds) > 1 else ()
    return dict(
        _model=ClassCodeModel(model, np.arange(n_classes)),
        _round_weights=[fedavg_message(kept)["weights"] for kept in rounds or [message]],
        _party_weights={upload.manifest["party"]: party_weights_of(upload.payload[SUMS])
                        for upload in averaged if SUMS in upload.payload},
        estimator_=model,
        history_=history,
        n_rounds_=len(history),
    )


def check_weights(checker: UploadChecker, shapes_of: ShapesOf) -> None:
    """A message's weights: float arrays of the shapes the agreed model has on the
    agreed features and classes (`shapes_of`, from `weight_shapes_of`), finite."""
    key, weights = "weights", fedavg_message(checker.upload)["weights"]
    shapes = shapes_of(checker.n_features, checker.n_classes)
    if not isinstance(weights, list) or len(weights) != len(shapes):
        checker.refuse(key, f"expected a list of {len(shapes)} weight arrays")
    for index, (array, shape) in enumerate(zip(weights, shapes)):
        checker.floats(f"{key}[{index}]", shape, value=array)


def check_party_upload(checker: UploadChecker, *, final: bool) -> None:
    """A FedAvg party's upload: its rows, and nothing in the clear; in every round
    before the final step its sums (which the base checks), none in the final step."""
    checker.count("n_rows", positive=True)
    if final and checker.upload.payload.get(SUMS):
        checker.refuse(SUMS, "sums after the server's message said done")


def check_server_message(checker: UploadChecker, plan: FedAvgPlan,
                         shapes_of: ShapesOf) -> None:
    """The server's message, as a party reads it: the global weights, the round to train
    and whether training is done."""
    check_weights(checker, shapes_of)
    checker.count("round", positive=True, at_most=plan.n_rounds)
    if not isinstance(checker.manifest("done"), bool):
        checker.refuse("done", "not true or false")
    history = checker.manifest("history")
    if not isinstance(history, list) or len(history) > plan.n_rounds or not all(
        isinstance(entry, dict) for entry in history
    ):
        checker.refuse("history", f"not a list of at most {plan.n_rounds} rounds")
