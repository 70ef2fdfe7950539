"""The one-shot ensemble's server step: selection and distillation, on the server."""


import numpy as np
from sklearn.base import is_regressor

from .._deployment._protocol import collect_uploads, server_expectations
from .._engine._fitting import Task, ensemble_proba, fit_clones, seeded_clone
from .._engine._seeds import derived_random_state, draw_seeds, root_seed


class _OneShotServerStep:
    """OneShotEnsembleClassifier's server side, run by `fit_server` on the
    parties' uploads and by `fit` in one process."""

    def fit_server(self, uploads, X_unlabeled=None, *, classes=None, trusted=(),
                   min_parties=None, limits=None):
        """The server step: select the ensemble among the parties' models, distil it.

        Checks every upload before loading it (see `FedKTClassifier.fit_server`). With
        the uploads of `fit_party` and the same `random_state`, the fitted estimator
        equals the one `fit` gives.

        Parameters
        ----------
        uploads : list of str, path-like, bytes or PartyUpload
            The parties' upload files.
        X_unlabeled : {array-like, sparse matrix, DataFrame}, default=None
            The agreed public data; required with a `student_estimator`.
        classes : array-like, default=None
            The agreed classes; ``None`` takes those of most uploads, and refuses the
            others.
        trusted : sequence of str, default=()
            Type names to load beyond scikit-learn's and XGBoost's.
        limits : skfedkt.UploadLimits, default=None
            Bounds on every file read (size, inflated size, manifest, payload objects);
            None means ``UploadLimits()``.
        min_parties : int, default=None
            If given, uploads that fail a check are left out (in ``left_out_parties_``)
            as long as this many parties remain; if None, any failure raises.

        Returns
        -------
        self : object
            The fitted classifier.
        """
        self._validate_params()
        self._clear_fitted_state()
        self._check_public_data(X_unlabeled)
        expected, X_unlabeled = server_expectations(self, X_unlabeled, classes)
        uploads, self.left_out_parties_ = collect_uploads(
            uploads, expected, trusted=trusted, min_parties=min_parties, limits=limits,
            check=self._check_upload,
        )
        manifest = uploads[0].manifest
        self.classes_ = np.array(manifest["classes"])
        if X_unlabeled is None:  # the features the parties agreed on
            self.n_features_in_ = manifest["n_features"]
            if manifest["feature_names"] is not None:
                self.feature_names_in_ = np.array(manifest["feature_names"], dtype=object)
        self.parties_ = np.array([upload.party for upload in uploads])
        self.upload_bytes_ = np.array([upload.n_bytes for upload in uploads])
        self._server_step(uploads, X_unlabeled, root_seed(self.random_state))
        return self

    @staticmethod
    def _check_upload(checker):
        """A one-shot upload: rows and class counts, a local model or none, and a
        validation score that is a scorer's (finite, at most 1) or none."""
        checker.rows_and_counts()
        checker.optional_model()
        checker.number("score", -np.inf, 1.0, optional=True)

    def _server_step(self, uploads, X_public, root):
        """Selection among the trained parties' models, then distillation."""
        self._check_some_party_trains([upload.manifest["n_rows"] for upload in uploads])
        trained = [i for i, upload in enumerate(uploads) if upload.payload["model"] is not None]
        self.trained_parties_ = self.parties_[trained]
        local_models = [uploads[i].model() for i in trained]
        self.estimators_ = [model.estimator for model in local_models]
        self._local_codes = [model.codes for model in local_models]
        if self.selection == "cv":
            self.local_scores_ = np.array(
                [np.nan if uploads[i].manifest["score"] is None else uploads[i].manifest["score"]
                 for i in trained], dtype=float,
            )
        rng = derived_random_state(root, "server")
        chosen = self._select(
            np.array([uploads[i].manifest["n_rows"] for i in trained]), rng
        )
        self._say(f"{len(trained)} parties trained a local model; the ensemble keeps "
                  f"{len(chosen)} ({self.selection!r} selection)")
        self.selected_parties_ = self.trained_parties_[chosen]
        self._ensemble = [local_models[i] for i in chosen]
        if self.student_estimator is not None:
            self._distil(X_public, rng)
        if X_public is not None:
            counts = [upload.manifest.get("class_counts") for upload in uploads]
            self._warn_if_classes_lost(
                self._predict_codes(X_public), "The model predicts on the public set",
                np.repeat(np.arange(len(self.classes_)), np.sum(counts, axis=0)),
                "the training rows", self._collapse_remedy(),
            )

    def _collapse_remedy(self):
        remedy = (
            "under label skew each party's model favours its own majority classes, and "
            "an average of them the classes that most parties hold. FedKTClassifier "
            "corrects its votes for the parties' class mixes."
        )
        if self.selection == "all":
            return remedy
        # a party holding mostly one class can top a held-out score measured on a few rows
        return (f"{remedy} The {self.n_selected} parties that selection={self.selection!r} "
                "keeps may share a majority class; selection='all' averages every party.")

    def _select(self, sizes, rng):
        """Sorted indices (into ``trained_parties_``) of the ensemble's models."""
        n_trained = len(sizes)
        k = min(self.n_selected, n_trained)
        if self.selection == "all":
            return np.arange(n_trained)
        if self.selection == "random":
            return np.sort(rng.choice(n_trained, size=k, replace=False))
        merit = sizes if self.selection == "data" else np.nan_to_num(
            self.local_scores_, nan=-np.inf
        )
        return np.sort(np.argsort(-merit, kind="stable")[:k])

    def _distil(self, X_public, rng):
        (seed,) = draw_seeds(rng, 1)
        targets = ensemble_proba(self._ensemble, X_public, len(self.classes_), self.voting)
        if is_regressor(self.student_estimator):
            self.student_ = seeded_clone(self.student_estimator, seed).fit(X_public, targets)
            self._student = None
        else:
            (self._student,), _, _ = fit_clones(
                [Task(self.student_estimator, targets.argmax(axis=1))], X_public,
                n_classes=len(self.classes_), seeds=[seed],
            )
            self.student_ = self._student.estimator
