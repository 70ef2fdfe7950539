"""The consensus distillation's parameters, resolved, checked and frozen."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from skfedkt.algorithm import Plan


@dataclass(frozen=True)
class ConsensusPlan(Plan):
    """What the steps read of `ConsensusDistillClassifier`'s parameters."""

    estimator: Any = None
    n_rounds: int = 2
    temperature: float = 0.5

    estimator_name: ClassVar[str] = "ConsensusDistillClassifier"
    upload_kind: ClassVar[str] = "public-set probabilities"

    @classmethod
    def of(cls, estimator: Any) -> ConsensusPlan:
        return cls(n_jobs=estimator.n_jobs, verbose=estimator.verbose,
                   estimator=estimator.estimator, n_rounds=estimator.n_rounds,
                   temperature=estimator.temperature)
