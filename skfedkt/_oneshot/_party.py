"""The one-shot ensemble's party step: what runs on a party's machine."""

import warnings

import numpy as np
from sklearn.exceptions import UndefinedMetricWarning
from sklearn.metrics import get_scorer
from sklearn.utils import _safe_indexing

from .._deployment._protocol import PartyData
from .._deployment._upload import PartyUpload
from .._engine._fitting import GlobalLabelClassifier, Task, fit_clones
from .._engine._seeds import draw_seeds, party_random_state


class _OneShotParty:
    """The party step of one-shot ensembles: a local model on the party's rows and, for
    ``selection="cv"``, a second model fit without a held-out share of them, whose score
    on that share ranks the party at the server.

    `OneShotEnsembleClassifier.fit_party` runs it on the party's machine, ``fit`` runs
    every party's in one flat parallel batch. A party with fewer rows than
    ``min_samples`` (two with "cv") trains nothing and sends only its size.
    """

    def __init__(self, config, party, rows, y, random_state):
        self.config, self.party, self.rows, self.y = config, party, rows, y
        self.trained = len(rows) >= config._min_rows()
        cv = self.trained and config.selection == "cv"
        self.split = config._validation_split(rows, random_state) if cv else None
        self.seeds = draw_seeds(random_state, (1 + cv) * self.trained)

    def tasks(self):
        template = self.config._local_template()
        tasks = [Task(template, self.y[self.rows], self.rows)] if self.trained else []
        if self.split is not None:
            fit_rows, _ = self.split
            tasks.append(Task(template, self.y[fit_rows], fit_rows))
        return tasks

    def upload(self, models, X, scorer, classes, manifest):
        """The local model, its held-out score and the party's class counts."""
        score = None
        if self.split is not None:
            score = self.config._validation_score(
                models[1], X, self.y, self.split[1], classes, scorer
            )
        return PartyUpload(
            manifest=dict(
                manifest,
                class_counts=np.bincount(self.y[self.rows], minlength=len(classes)).tolist(),
                score=None if score is None or np.isnan(score) else score,
            ),
            payload={
                "model": models[0].estimator if self.trained else None,
                "codes": models[0].codes if self.trained else None,
            },
        )


class _OneShotPartyStep:
    """OneShotEnsembleClassifier's party side, run by `fit_party` on one party's
    machine and by `fit` for every party."""

    def fit_party(self, X, y, *, party, classes, X_unlabeled=None, party_seed=None):
        """The party step, on one party's machine: its local model and, for
        ``selection="cv"``, the model's held-out score.

        This estimator is not modified.

        Parameters
        ----------
        X : {array-like, sparse matrix, DataFrame} of shape (n_samples, n_features)
            The party's rows.
        y : array-like of shape (n_samples,)
            Their labels, all among `classes`.
        party : str or int
            The party's name, as the server will know it.
        classes : array-like of shape (n_classes,)
            The class labels every party and the server agreed on.
        X_unlabeled : {array-like, sparse matrix, DataFrame}, default=None
            The agreed public data, when the server distils; its fingerprint goes into
            the manifest so that the server can check it.
        party_seed : int, default=None
            Seed of this party's draws (its validation split, its model's seed); None
            derives them from `random_state` and `party`, as `fit` does.

        Returns
        -------
        upload : skfedkt.PartyUpload
            Save it with ``upload.save(path)`` and send the file to the server.
        """
        self._validate_params()
        scorer = self._scorer() if self.selection == "cv" else None
        data = PartyData(self, X, y, classes, X_unlabeled, party)
        step = _OneShotParty(self, data.party, np.arange(len(data.y)), data.y,
                             party_random_state(self.random_state, data.party, party_seed))
        (models,) = self._party_tier([step], data.X, len(data.classes))
        return step.upload(models, data.X, scorer, data.classes, data.manifest(self))

    def _party_tier(self, steps, X, n_classes):
        """Every party's local model (and cv model) in one flat parallel batch; the fitted
        models of each step."""
        fits = fit_clones(
            [task for step in steps for task in step.tasks()], X, n_classes=n_classes,
            seeds=np.concatenate([step.seeds for step in steps]),
            n_jobs=self.n_jobs, verbose=max(self.verbose - 1, 0),
        ).models
        sizes = np.cumsum([0] + [len(step.seeds) for step in steps])
        return [fits[start:stop] for start, stop in zip(sizes[:-1], sizes[1:])]

    def _min_rows(self):
        """Rows a party needs to train (two with "cv": one to fit, one to validate)."""
        return max(self.min_samples, 2) if self.selection == "cv" else self.min_samples

    def _validation_split(self, rows, rng):
        n_validation = min(max(1, round(self.validation_fraction * len(rows))), len(rows) - 1)
        shuffled = rng.permutation(rows)
        return shuffled[n_validation:], shuffled[:n_validation]

    def _scorer(self):
        """The scorer of `scoring`; an unknown name fails here, before any fit."""
        if callable(self.scoring):
            return self.scoring
        if self.scoring is None:
            # ROC AUC for binary problems (the paper), accuracy otherwise: decided once
            # the classes are known
            return None
        try:
            return get_scorer(self.scoring)
        except ValueError as exc:
            raise ValueError(f"Invalid scoring={self.scoring!r}: {exc}") from exc

    def _validation_score(self, model, X, y, rows, classes, scorer):
        """`model`'s score on the validation rows `rows` of `X` (class codes `y`)."""
        if scorer is None:
            scorer = get_scorer("roc_auc" if len(classes) == 2 else "accuracy")
        view = GlobalLabelClassifier(model, classes)
        # e.g. ROC AUC of validation rows holding a single class: NaN, ranked last
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UndefinedMetricWarning)
            try:
                return float(scorer(view, _safe_indexing(X, rows), classes[y[rows]]))
            except ValueError:
                return np.nan
