"""The one-shot ensemble's server step: selection and distillation, on the server.

Functions of a frozen `OneShotPlan` and the parties' uploads."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from sklearn.base import is_regressor

from .._deployment._received import UploadChecker
from .._engine._class_codes import ClassCodeModel
from .._engine._context import Message
from .._engine._fitting import Task, TierJob, ensemble_proba, fit_clones
from .._engine._seeds import seeded_clone
from .._engine._seeds import derived_random_state, draw_seeds
from .._engine._validation import parties_in_words, warn_if_classes_lost
from ._party import check_some_party_trains
from ._payloads import oneshot_upload
from ._plan import OneShotPlan
from ._sums import distils_every_party


def check_upload(plan: OneShotPlan, checker: UploadChecker) -> None:
    """A one-shot upload in the clear: rows and class counts, a local model exactly
    where its rows reach ``min_samples``, and a validation score that is a scorer's
    (finite, at most 1) or none (each where secure aggregation does not keep it at the
    party)."""
    n_rows, _ = checker.rows_and_counts()
    checker.optional_model(required=n_rows >= plan.min_rows)
    checker.number("score", -np.inf, 1.0, optional=True)


def server_step(plan: OneShotPlan, uploads: Sequence[Message], X_public: Any, root: int,
                classes: np.ndarray, sums: dict[str, np.ndarray]) -> dict[str, Any]:
    """Selection among the trained parties' models, then distillation on `X_public`
    (with ``distill=True``) of the ensemble's mean vote: from the total of the parties'
    `sums` where it holds every party's model (``selection="all"``), else from the
    selected models. Returns the fitted attributes of `OneShotEnsembleClassifier`."""
    check_some_party_trains(plan, [upload.manifest["n_rows"] for upload in uploads])
    rng = derived_random_state(root, "server")
    fitted = _selected_ensemble(plan, uploads, rng)
    if plan.final is not None:
        targets = (sums["votes"] / int(sums["trained"]) if distils_every_party(plan)
                   else ensemble_proba(fitted["_ensemble"], X_public, len(classes),
                                       plan.voting))
        fitted.update(_distil(plan, targets, X_public, len(classes), rng))
    return fitted


def _selected_ensemble(plan: OneShotPlan, uploads: Sequence[Message],
                       rng: np.random.RandomState) -> dict[str, Any]:
    """The trained parties (those whose rows reach ``min_samples``), their models
    (where the server received them) and those `plan.selection` keeps in the
    ensemble."""
    trained = [upload for upload in uploads if upload.manifest["n_rows"] >= plan.min_rows]
    local_models = [ClassCodeModel(payload["model"], payload["codes"])
                    for payload in map(oneshot_upload, trained) if payload["model"] is not None]
    trained_parties = np.array([upload.manifest["party"] for upload in trained])
    fitted: dict[str, Any] = dict(
        trained_parties_=trained_parties,
        estimators_=[model.estimator for model in local_models],
        _local_codes=[model.codes for model in local_models],
    )
    scores = None
    if plan.selection == "cv":
        scores = np.array([np.nan if upload.manifest["score"] is None
                           else upload.manifest["score"] for upload in trained], dtype=float)
        fitted["local_scores_"] = scores
    chosen = _select(plan, np.array([upload.manifest["n_rows"] for upload in trained]),
                     scores, rng)
    plan.say(f"{parties_in_words(len(trained))} trained a local model; the ensemble keeps "
             f"{len(chosen)} ({plan.selection!r} selection)")
    # no models where secure aggregation keeps them at their parties
    fitted.update(selected_parties_=trained_parties[chosen],
                  _ensemble=[local_models[i] for i in chosen] if local_models else [])
    return fitted


def warn_if_collapsed(plan: OneShotPlan, predicted: np.ndarray, classes: np.ndarray,
                      sums: dict[str, np.ndarray]) -> None:
    """Warn when the model's predictions on the public set (class codes `predicted`)
    lose classes that the parties' rows hold: their class counts, as `sums` holds their
    total."""
    counts = sums["class_counts"]
    warn_if_classes_lost(
        classes, predicted, "The model predicts on the public set",
        np.repeat(np.arange(len(classes)), counts),
        "the training rows", _collapse_remedy(plan),
    )


def _collapse_remedy(plan):
    remedy = (
        "under label skew each party's model favours its own majority classes, and "
        "an average of them the classes that most parties hold. FedKTClassifier "
        "corrects its votes for the parties' class mixes."
    )
    if plan.selection == "all":
        return remedy
    # a party holding mostly one class can top a held-out score measured on a few rows
    return (f"{remedy} The {plan.n_selected} parties that selection={plan.selection!r} "
            "keeps may share a majority class; selection='all' averages every party.")


def _select(plan, sizes, scores, rng):
    """Sorted indices (into the trained parties) of the ensemble's models."""
    n_trained = len(sizes)
    k = min(plan.n_selected, n_trained)
    if plan.selection == "all":
        return np.arange(n_trained)
    if plan.selection == "random":
        return np.sort(rng.choice(n_trained, size=k, replace=False))
    merit = sizes if plan.selection == "data" else np.nan_to_num(scores, nan=-np.inf)
    return np.sort(np.argsort(-merit, kind="stable")[:k])


def _distil(plan, targets, X_public, n_classes, rng):
    """The final model and its fitted attributes: a regressor learns the ensemble's class
    probabilities on the public rows (`targets`), a classifier its labels."""
    (seed,) = draw_seeds(rng, 1)
    if is_regressor(plan.final):
        return dict(final_estimator_=seeded_clone(plan.final, seed).fit(X_public, targets),
                    _final_model=None)
    (final,) = fit_clones(
        [Task(plan.final, targets.argmax(axis=1), name="the final model")],
        TierJob(X_public, n_classes), [seed], tier="student", say=plan.say,
    ).models
    return dict(final_estimator_=final.estimator, _final_model=final)
