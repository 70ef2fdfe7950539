"""The one-shot ensemble's party step: what runs on a party's machine.

Functions of a frozen `OneShotPlan` and the party's data: `party_step` on one party's
machine, `party_tier` for the local models of many parties in one batch.
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from functools import partial
from typing import Any

import numpy as np
from sklearn.exceptions import UndefinedMetricWarning
from sklearn.metrics import get_scorer

from .._engine._compat import safe_indexing
from .._deployment._upload import PartyUpload
from .._engine._class_codes import ClassCodeModel, GlobalLabelClassifier
from .._engine._fitting import Task, TierJob, fit_clones
from .._engine._seeds import draw_seeds
from ._payloads import OneShotUpload
from ._plan import OneShotPlan
from ._sums import party_sums

# what a party's task gives back: its fitted model and its score (None unless scored)
TaskFit = tuple[ClassCodeModel, Any]


class OneShotParty:
    """The party step of one-shot ensembles: a local model on the party's rows and, for
    ``selection="cv"``, a second model fit without a held-out share of them, whose score
    on that share ranks the party at the server.

    `party_step` runs it on the party's machine, `OneShotEnsembleClassifier.fit` runs
    every party's in one flat parallel batch (`party_tier`). A party with fewer rows
    than ``min_samples`` (two with "cv") trains nothing and sends only its size.
    """

    def __init__(self, plan: OneShotPlan, party: Any, rows: np.ndarray, y: np.ndarray,
                 random_state: np.random.RandomState) -> None:
        self.plan, self.party, self.rows, self.y = plan, party, rows, y
        self.trained = len(rows) >= plan.min_rows
        cv = self.trained and plan.selection == "cv"
        self.split = _validation_split(rows, plan.validation_fraction,
                                       random_state) if cv else None
        self.seeds = draw_seeds(random_state, (1 + cv) * self.trained)

    def tasks(self, classes: np.ndarray) -> list[Task]:
        """The local model's task and, with "cv", that of the model fit without the
        held-out rows, which scores itself on them where it is fit."""
        template = self.plan.local
        tasks = ([Task(template, self.y[self.rows], self.rows, name=f"party {self.party!r}")]
                 if self.trained else [])
        if self.split is not None:
            fit_rows, held_out = self.split
            score = partial(_validation_score, y=self.y, rows=held_out, classes=classes,
                            scorer=self.plan.scorer)
            tasks.append(Task(template, self.y[fit_rows], fit_rows, score=score,
                              name=f"party {self.party!r}, without its held-out rows"))
        return tasks

    def upload(self, fits: list[TaskFit], classes: np.ndarray, manifest: dict[str, Any],
               X_public: Any) -> PartyUpload:
        """The local model, its held-out score and the party's class counts in the
        clear; `fits` are the ``(model, score)`` of its tasks. In the sum
        (`_sums.party_sums`), whether it trained a model, its class counts and, where
        the server distils every party's model, that model's votes on the public rows
        `X_public`."""
        (models, scores) = zip(*fits) if fits else ((), ())
        score = scores[1] if self.split is not None else None
        model = models[0] if self.trained else None
        counts = np.bincount(self.y[self.rows], minlength=len(classes))
        payload = dict(OneShotUpload(
            model=None if model is None else model.estimator,
            codes=None if model is None else model.codes,
        ), sums=party_sums(self.plan, model, X_public, counts))
        return PartyUpload(
            manifest=dict(
                manifest,
                class_counts=counts.tolist(),
                score=None if score is None or np.isnan(score) else score,
            ),
            payload=payload,
        )


def party_tier(plan: OneShotPlan, parties: Sequence[OneShotParty], X: Any,
               classes: np.ndarray) -> list[list[TaskFit]]:
    """Every party's local model (and cv model, scored on its held-out rows) in one
    flat parallel batch; the ``(model, score)`` of each task of each party."""
    fits = fit_clones(
        [task for party in parties for task in party.tasks(classes)],
        TierJob(X, len(classes)), np.concatenate([party.seeds for party in parties]),
        tier="local models", **plan.clone_fitting,
    )
    fits = list(zip(fits.models, fits.scores))
    sizes = np.cumsum([0] + [len(party.seeds) for party in parties])
    return [fits[start:stop] for start, stop in zip(sizes[:-1], sizes[1:])]


def check_some_party_trains(plan: OneShotPlan, party_sizes: list[int]) -> None:
    """Refuse, before any fit, parties of which none has the rows to train."""
    if max(party_sizes) < plan.min_rows:
        raise ValueError(
            f"No party has the {plan.min_rows} samples needed to train a local "
            f"model; the largest has {max(party_sizes)} sample(s). Lower min_samples."
        )


def _validation_split(rows, validation_fraction, rng):
    n_validation = min(max(1, round(validation_fraction * len(rows))), len(rows) - 1)
    shuffled = rng.permutation(rows)
    return shuffled[n_validation:], shuffled[:n_validation]


def _validation_score(model, X, *, y, rows, classes, scorer):
    """`model`'s score on the validation rows `rows` of `X` (class codes `y`).

    A score the metric leaves undefined is NaN, which the server ranks last: the
    default ROC AUC of validation rows holding a single class, a scorer's
    ``ValueError``, or a scorer's UndefinedMetricWarning (ignored in the main thread).
    """
    if scorer is None:
        if len(classes) > 2:
            scorer = get_scorer("accuracy")
        elif np.unique(y[rows]).size < 2:
            return np.nan
        else:
            scorer = get_scorer("roc_auc")
    view = GlobalLabelClassifier(model, classes)
    with _undefined_metrics_ignored():
        try:
            return float(scorer(view, safe_indexing(X, rows), classes[y[rows]]))
        except ValueError:
            return np.nan


@contextmanager
def _undefined_metrics_ignored() -> Iterator[None]:
    """Ignore UndefinedMetricWarning in the main thread; elsewhere change nothing.

    `warnings.catch_warnings` swaps the process's filters: worker threads (joblib's
    threading backend) that leave it out of order would leave the filter in place for
    the user's whole session.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UndefinedMetricWarning)
        yield
