"""The hooks of the algorithms whose parties keep a model each, round after round (FedCT,
DS-FL): their parties' states, the warning about the federation's classes, and their
predictions, the parties' vote or one distilled model."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, ClassVar

import numpy as np

from ._engine._context import Message, PartyContext, ServerContext
from ._engine._fitting import ensemble_proba
from ._engine._party_models import base_estimators
from ._engine._validation import (
    _SKEWED_PARTIES_REMEDY,
    SHIFTED_PUBLIC_SET_REMEDY,
    FederatedData,
    warn_if_classes_lost,
)


class PartyModelsMixin:
    """What a `BaseFederatedClassifier` whose parties each keep a model shares with the
    others of its kind: ``_party_type(plan, party, estimator, rows, y, random_state)``
    makes a party's state; ``estimator``, ``distill``, ``final_estimator`` and
    ``voting`` are its parameters; ``_models`` (the parties' final models, None where a
    party kept it) and ``_final_model`` (the distilled model, or None) its fitted
    state."""

    _party_type: ClassVar[Callable[..., Any]]

    estimator: Any
    distill: bool
    final_estimator: Any
    voting: str
    classes_: np.ndarray
    _models: list[Any]
    _final_model: Any

    def _base_estimators(self) -> list[Any]:
        final = [self.final_estimator] if self.distill and self.final_estimator else []
        return [*base_estimators(self.estimator), *final]

    def _parties(self, context: PartyContext[Any],
                 random_state_of: Callable[[Any], np.random.RandomState]) -> list[Any]:
        plan, data = context.plan, context.data
        estimators = (plan.party_estimators(data.parties) if data.pooled
                      else [plan.own_estimator(data.parties[0])])
        return [self._party_type(plan, party, estimator, rows, data.y,
                                 random_state_of(party))
                for party, estimator, rows in zip(data.parties, estimators, data.party_rows)]

    def _after_fit(self, context: ServerContext[Any], uploads: Sequence[Message],
                   data: FederatedData | None) -> None:
        if data is not None:
            warn_if_classes_lost(
                self.classes_, self._predict_codes(context.X_public),
                ("The final model" if self.distill else "The parties' vote")
                + " predicts on the public set", data.y, "the training rows",
                SHIFTED_PUBLIC_SET_REMEDY if data.public_set_shifted
                else _SKEWED_PARTIES_REMEDY,
            )

    def _proba(self, X: Any) -> np.ndarray:
        # the final model's probabilities, or the vote shares (hard voting) or averaged
        # probabilities of the parties' models
        if self.distill:
            return self._final_model.predict_proba(X, len(self.classes_))
        return ensemble_proba(self._models, X, len(self.classes_), self.voting)

    def _predict_codes(self, X: Any) -> np.ndarray:
        # the argmax of predict_proba, as scikit-learn requires
        return self._proba(X).argmax(axis=1)


def nothing_in_the_clear(clf: Any) -> np.ndarray:
    """``Uploads.sent_bytes`` of these algorithms: in the clear, nothing but the final
    model, which is not counted (the base adds what each party sent in the sum)."""
    return np.zeros(len(clf.parties_))
