"""The one-shot ensemble's plan: the parameters of one fit, resolved and checked once,
frozen. The party step and the server step read the plan and nothing else of the
estimator."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sklearn.base import BaseEstimator
from sklearn.metrics import get_scorer
from sklearn.tree import DecisionTreeClassifier

from .._engine._plan import Plan

if TYPE_CHECKING:  # the base class: the algorithm's own would import in a circle
    from .._base import BaseFederatedClassifier


@dataclass(frozen=True)
class OneShotPlan(Plan):
    """What one fit of `OneShotEnsembleClassifier` runs (see `OneShotPlan.of`)."""

    estimator_name = "OneShotEnsembleClassifier"
    upload_kind = "local model"

    local: BaseEstimator
    selection: str
    n_selected: int
    min_rows: int
    validation_fraction: float
    scorer: Any
    voting: str
    final: BaseEstimator | None

    @classmethod
    def of(cls, estimator: BaseFederatedClassifier) -> OneShotPlan:
        """The plan of a `OneShotEnsembleClassifier`'s parameters: the local model (a
        decision tree by default), the rows a party needs to train (two with "cv": one
        to fit, one to validate), the scorer (an unknown name fails here, before any
        fit)."""
        cv = estimator.selection == "cv"
        if estimator.final_estimator is not None and not estimator.distill:
            raise ValueError(
                "final_estimator is the model the ensemble is distilled into, but "
                "distill=False keeps the ensemble: pass distill=True to distil (or leave "
                "final_estimator out)."
            )
        return cls(
            local=local_template(estimator), selection=estimator.selection,
            n_selected=estimator.n_selected,
            min_rows=max(estimator.min_samples, 2) if cv else estimator.min_samples,
            validation_fraction=estimator.validation_fraction,
            scorer=_scorer(estimator.scoring) if cv else None,
            voting=estimator.voting,
            final=final_template(estimator) if estimator.distill else None,
            n_jobs=estimator.n_jobs, verbose=estimator.verbose,
        )

    @property
    def public_set_use(self) -> str | None:
        return None if self.final is None else "distill=True distils the ensemble on it"

    def uploaded_estimators(self, party: Any) -> list[Any]:
        return [self.local]


def local_template(estimator: BaseFederatedClassifier) -> Any:
    """The local model of a `OneShotEnsembleClassifier`, a decision tree by default."""
    return DecisionTreeClassifier() if estimator.estimator is None else estimator.estimator


def final_template(estimator: BaseFederatedClassifier) -> Any:
    """The model a `OneShotEnsembleClassifier` distils into: its `final_estimator`, or
    like its local model."""
    if estimator.final_estimator is None:
        return local_template(estimator)
    return estimator.final_estimator


def _scorer(scoring: Any) -> Any:
    """The scorer of `scoring`; None is decided once the classes are known (ROC AUC for
    binary problems, as in the paper, accuracy otherwise)."""
    if callable(scoring) or scoring is None:
        return scoring
    try:
        return get_scorer(scoring)
    except ValueError as exc:
        raise ValueError(f"Invalid scoring={scoring!r}: {exc}") from exc
