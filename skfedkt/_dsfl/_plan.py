"""DS-FL's plan: the parameters of one fit, checked once and frozen. The party step and
the server step read the plan and nothing else of the estimator."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .._engine._class_codes import sample_weight_param
from .._engine._party_models import (
    PartyModels,
    base_estimators,
    checked_entries,
    final_of,
)
from .._engine._plan import Plan

if TYPE_CHECKING:  # the base class: the algorithm's own would import in a circle
    from .._base import BaseFederatedClassifier


@dataclass(frozen=True)
class DSFLPlan(PartyModels, Plan):
    """What one fit of `DSFLClassifier` runs (see `DSFLPlan.of`)."""

    estimator_name = "DSFLClassifier"
    upload_kind = "final model"

    estimator: Any
    n_rounds: int
    temperature: float
    public_weight: str | float
    party_weight: str
    match_shares: bool
    tol: float
    n_iter_no_change: int
    voting: str
    #: the final model: a clone of it fitted on the public rows with the last soft
    #: labels (``distill=True``), or None for the parties' vote
    final: Any = None

    @property
    def distill(self) -> bool:
        return self.final is not None

    @classmethod
    def of(cls, estimator: BaseFederatedClassifier) -> DSFLPlan:
        """The plan of a `DSFLClassifier`'s parameters: every model learns weighted
        rows (the public rows once per class, weighted by their soft labels), so every
        estimator must take sample weights; a distilled model needs soft labels to
        learn and one estimator to learn them."""
        entries = checked_entries(estimator)
        final = final_of(estimator, "the last round's soft labels")
        for model in [*base_estimators(entries), *([final] if final is not None else [])]:
            if sample_weight_param(model) is None:
                raise ValueError(
                    f"DSFLClassifier teaches every model soft labels as weighted rows, "
                    f"and {type(model).__name__} takes no sample_weight in fit: use a "
                    "classifier that does (trees, forests, gradient boosting, XGBoost, "
                    "logistic regression), or a Pipeline ending in one.")
        return cls(estimator=entries, n_rounds=estimator.n_rounds,
                   temperature=estimator.temperature,
                   public_weight=estimator.public_weight,
                   party_weight=estimator.party_weight, match_shares=estimator.match_shares,
                   tol=estimator.tol,
                   n_iter_no_change=estimator.n_iter_no_change, voting=estimator.voting,
                   final=final, n_jobs=estimator.n_jobs, verbose=estimator.verbose)

    def public_row_weight(self, n_rows: int, n_public: int, median_rows: float) -> float:
        """The weight of one public row (spread over its classes by its soft labels) at a
        party of `n_rows` rows, where the median party holds `median_rows`:
        ``"balanced"``, the public rows together weigh as much as the party's own rows,
        or the median party's where it holds fewer (a small party's model then rests on
        the federation's labels more than on its few rows)."""
        if self.public_weight == "balanced":
            return max(n_rows, median_rows) / n_public
        return float(self.public_weight)
