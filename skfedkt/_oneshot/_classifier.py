"""OneShotEnsembleClassifier: its parameters, `fit`, which composes both steps, and prediction."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from numbers import Integral, Real
from typing import Any

import numpy as np
from sklearn.base import is_regressor

from .._engine._compat import HasMethods, Interval, StrOptions, num_samples
from .._base import BaseFederatedClassifier, Releases, Uploads, shared_docs
from .._deployment._fields import InClear
from .._deployment._upload import PartyUpload, payloads_bytes
from .._deployment._received import UploadChecker
from .._engine._context import (
    Message,
    PartyContext,
    PartyStepResult,
    ServerContext,
)
from .._engine._class_codes import ClassCodeModel
from .._engine._fitting import ensemble_proba
from .._engine._validation import FederatedData
from .._privacy._release import Release, final_model_release, models_release
from ._party import OneShotParty, check_some_party_trains, party_tier
from ._payloads import OneShotUpload, oneshot_upload
from ._plan import OneShotPlan, final_template, local_template
from ._server import check_upload, server_step, warn_if_collapsed
from ._sums import SUMS


def _upload_check(context: ServerContext[OneShotPlan],
                  final: bool) -> Callable[[UploadChecker], Any]:
    # the same fields in every step, none of them sized by the agreement
    return partial(check_upload, context.plan)


def _models_needed(plan: OneShotPlan) -> tuple[str, str] | None:
    """The setting under which the server needs each party's model: an ensemble that
    predicts (no distillation), or one whose members the server selects."""
    if plan.final is None:
        return ("distill=False (the ensemble predicts with the parties' models)",
                "distill=True with selection='all'")
    if plan.selection != "all":
        return (f"selection={plan.selection!r} (the server ranks each party's model)",
                "selection='all'")
    return None


FIELDS = (
    InClear("model", "its local model (none from a party too small to train)",
            party_only=True, needed_when=_models_needed),
    InClear("codes", "the class codes of its model's outputs", party_only=True,
            needed_when=_models_needed),
    InClear("class_counts", "its rows of each class", "manifest", party_only=True),
    InClear("score", "with selection='cv': its model's score on its held-out rows",
            "manifest", party_only=True,
            needed_when=lambda plan: (("selection='cv'", "selection='all'")
                                      if plan.selection == "cv" else None)),
    *SUMS,
)


def _sent_bytes(clf: OneShotEnsembleClassifier) -> np.ndarray:
    # a trained party sends its local model; a party too small to train, its size
    sent = np.zeros(len(clf.parties_))
    sent[np.isin(clf.parties_, clf.trained_parties_)] = payloads_bytes(
        [dict(OneShotUpload(model=model, codes=codes))
         for model, codes in zip(clf.estimators_, clf._local_codes)], clf.n_jobs)
    return sent


def _fit_releases(clf: OneShotEnsembleClassifier) -> list[Release]:
    """What a one-shot ensemble lets out (see `skfedkt.privacy.membership_audit`):
    every trained party's local model (its upload) and the final model; under secure
    aggregation, which keeps the local models at their parties, the final model."""
    n_classes = len(clf.classes_)
    return [
        *(models_release("upload", party, [ClassCodeModel(model, codes)], n_classes)
          for party, model, codes in zip(clf.trained_parties_.tolist(), clf.estimators_,
                                         clf._local_codes)),
        final_model_release(clf),
    ]


def _upload_releases(clf: OneShotEnsembleClassifier, upload: PartyUpload,
                     n_classes: int) -> list[Release]:
    """What one party's upload lets out: its local model, if it trained one."""
    if oneshot_upload(upload)["model"] is None:
        return []
    return [models_release("upload", upload.party, [upload.model()], n_classes)]


@shared_docs
class OneShotEnsembleClassifier(BaseFederatedClassifier):
    """One-shot federated learning: an ensemble of selected local models, optionally distilled.

    Every party with at least `min_samples` rows trains one model on its own rows and
    sends it to the server in a single round; smaller parties send nothing. The server
    keeps an ensemble of the local models chosen by `selection` and averages their
    predictions. With ``distill=True`` and a public set, the server distils the
    ensemble into one model, `final_estimator` (the paper's student).

    Parameters
    ----------
    estimator : estimator object, default=None
        The local model, cloned for every party. ``None`` means
        ``DecisionTreeClassifier()``. It must implement ``fit`` and ``predict``.
    selection : {"all", "cv", "data", "random"}, default="all"
        Which local models form the ensemble:

        - ``"all"``: every local model;
        - ``"cv"``: each party holds out `validation_fraction` of its rows, trains on the
          rest and reports its `scoring` on the held-out rows; the `n_selected` best
          parties are kept, with their model refit on all their rows (the model a party
          sends is trained on all its data; the held-out fit only measures it);
        - ``"data"``: the `n_selected` parties with the most rows (ties: first in
          ``parties_`` order);
        - ``"random"``: `n_selected` parties drawn uniformly without replacement.
    n_selected : int, default=10
        Size of the ensemble for the ``"cv"``, ``"data"`` and ``"random"`` selections (all
        trained models when fewer were trained).
    min_samples : int, default=1
        Parties with fewer rows train and send nothing (the paper uses 30). With
        ``selection="cv"`` a party also needs two rows, one to train and one to validate.
    validation_fraction : float in (0, 1), default=0.2
        Share of a party's rows held out for its score with ``selection="cv"`` (at least
        one row, and at least one left for training).
    scoring : str or callable, default=None
        A scikit-learn scorer for ``selection="cv"``. ``None`` means ROC AUC for binary
        problems, as in the paper, and accuracy otherwise. A party whose held-out score
        is undefined (for instance a single class in its validation rows) ranks last.
    voting : {"soft", "hard"}, default="soft"
        ``"soft"`` averages the selected models' ``predict_proba`` (a model without it
        contributes its vote); ``"hard"`` takes their majority, and ``predict_proba``
        gives the vote shares. Columns always follow the global ``classes_``, even when a
        party saw few classes.
    distill : bool, default=False
        Whether the server distils the ensemble into one final model on the public set
        passed as ``X_unlabeled`` (which it then requires); ``predict`` then uses that
        model alone. False keeps the ensemble, the paper's main method.
    final_estimator : estimator object, default=None
        The model the server distils into, with ``distill=True`` (the paper's student):
        a regressor learns the ensemble's class probabilities (one output per class,
        the paper's kernel distillation), a classifier its hard labels. ``None`` means
        a clone of `estimator`. Its methods (``predict_proba``; a regressor's outputs
        as ``decision_function``) are those this classifier offers.
    n_jobs : int, default=None
        Number of jobs for fitting the local models in parallel.
    random_state : int, RandomState instance or None, default=None
        Controls the validation splits, the random selection and one seed per clone.
    verbose : int, default=0
        If positive, `fit` prints its stages; larger values also make the parallel
        fitting verbose.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
        The class labels, over all parties.
    n_features_in_ : int
        Number of features seen during fit.
    feature_names_in_ : ndarray of shape (`n_features_in_`,)
        Names of features seen during fit. Defined only when `X` has string column names.
    parties_ : ndarray of shape (n_parties,)
        The party labels found in ``groups``, sorted.
    trained_parties_ : ndarray of shape (n_trained,)
        The parties with enough rows to train and send a model: whose rows, as their
        manifests say, reach `min_samples`.
    estimators_ : list of estimator
        Every local model trained on a party's full rows, aligned with
        ``trained_parties_``; empty under secure aggregation. Like every fitted clone,
        each was trained on the positions ``0..k-1`` of the ``k`` classes its labels
        held (skorch nets: on the indices into ``classes_``), so its own predictions
        are not labels of ``classes_``; a party with one class has a constant
        ``DummyClassifier``.
    selected_parties_ : ndarray of shape (n_ensemble,)
        The parties whose models form the ensemble (every trained party under secure
        aggregation).
    local_scores_ : ndarray of shape (n_trained,)
        With ``selection="cv"`` only: each trained party's held-out score (NaN where
        undefined), aligned with ``trained_parties_``.
    final_estimator_ : estimator
        The distilled model, with ``distill=True``.
    upload_bytes_ : ndarray of shape (n_parties,)
        Bytes each party sent in the one round, aligned with ``parties_``. After `fit`,
        its local model as skops writes it into an upload file, measured when first
        read (0 for a party too small to train: its size and validation score are a
        few bytes, not counted), and the arrays of its sums; after `fit_server`, the
        size of its upload file.
        Under secure aggregation, the keys, sealed shares, masked votes and unmasking
        shares of its secure sum.
    left_out_parties_ : dict
        Only after `fit_server`: the uploads it left out under ``min_parties``, with the
        reason, keyed by party (or file).
    $tier_fits

    Notes
    -----
    Across organisations, `fit_party` runs the party step on each party's machine and
    `fit_server` the server step on their upload files; `fit` is exactly these steps in
    one process, so both give the same model for the same `random_state`. Every party
    that can train sends its model in the one round, and the server selects.

    Every party sends in the sum whether it trained a model and its class counts and,
    with ``distill=True`` and ``selection="all"``, its model's votes on the public set:
    the server distils the ensemble's mean vote from their total. Under
    ``skfedkt.set_config(secure_aggregation=True)`` (these settings only) a secure sum
    adds them, and no local model, score or party's class counts reach the server.

    References
    ----------
    .. [1] N. Guha, A. Talwalkar and V. Smith, "One-Shot Federated Learning",
       arXiv:1902.11175, 2019, Section 3.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.datasets import load_breast_cancer
    >>> from sklearn.model_selection import train_test_split
    >>> from sklearn.svm import SVC
    >>> from skfedkt import OneShotEnsembleClassifier
    >>> X, y = load_breast_cancer(return_X_y=True)
    >>> X_train, X_test, y_train, y_test = train_test_split(X, y, random_state=0)
    >>> party = np.arange(len(y_train)) % 8
    >>> clf = OneShotEnsembleClassifier(SVC(), selection="cv", n_selected=4, random_state=0)
    >>> clf.fit(X_train, y_train, groups=party)
    OneShotEnsembleClassifier(estimator=SVC(), n_selected=4, random_state=0,
                              selection='cv')
    >>> len(clf.estimators_), len(clf.selected_parties_)
    (8, 4)
    >>> print(f"{clf.score(X_test, y_test):.2f}")
    0.9...
    """

    _plan_type = OneShotPlan
    _uploads = Uploads(check=_upload_check, sent_bytes=_sent_bytes, fields=FIELDS)
    _releases = Releases(of_fit=_fit_releases, of_upload=_upload_releases)

    _private_fitted = ("_ensemble", "_local_codes", "_final_model")

    _parameter_constraints = {
        "estimator": [HasMethods(["fit", "predict"]), None],
        "selection": [StrOptions({"all", "cv", "data", "random"})],
        "n_selected": [Interval(Integral, 1, None, closed="left")],
        "min_samples": [Interval(Integral, 1, None, closed="left")],
        "validation_fraction": [Interval(Real, 0, 1, closed="neither")],
        "scoring": [str, callable, None],
        "voting": [StrOptions({"soft", "hard"})],
        "distill": ["boolean"],
        "final_estimator": [HasMethods(["fit", "predict"]), None],
        "n_jobs": [Integral, None],
        "random_state": ["random_state"],
        "verbose": ["verbose"],
    }

    def __init__(
        self,
        estimator=None,
        *,
        selection="all",
        n_selected=10,
        min_samples=1,
        validation_fraction=0.2,
        scoring=None,
        voting="soft",
        distill=False,
        final_estimator=None,
        n_jobs=None,
        random_state=None,
        verbose=0,
    ):
        self.estimator = estimator
        self.selection = selection
        self.n_selected = n_selected
        self.min_samples = min_samples
        self.validation_fraction = validation_fraction
        self.scoring = scoring
        self.voting = voting
        self.distill = distill
        self.final_estimator = final_estimator
        self.n_jobs = n_jobs
        self.random_state = random_state
        self.verbose = verbose

    def _base_estimators(self) -> list[Any]:
        return [local_template(self), *([final_template(self)] if self.distill else [])]

    # --- the algorithm's steps (see BaseFederatedClassifier) ---------------------------

    def _parties(self, context: PartyContext[OneShotPlan],
                 random_state_of: Callable[[Any], np.random.RandomState],
                 ) -> list[OneShotParty]:
        plan, data = context.plan, context.data
        if data.pooled:  # on its own machine, a party too small to train sends its size
            check_some_party_trains(plan, [len(rows) for rows in data.party_rows])
        return [OneShotParty(plan, party, rows, data.y, random_state_of(party))
                for party, rows in zip(data.parties, data.party_rows)]

    def _party_step(self, context: PartyContext[OneShotPlan],
                    parties: Sequence[OneShotParty]) -> PartyStepResult:
        data = context.data
        fits = party_tier(context.plan, parties, data.X, data.classes)
        return PartyStepResult([
            party.upload(party_fits, data.classes, manifest, data.X_public)
            for party, party_fits, manifest in zip(parties, fits, context.manifests)])

    def _server_step(self, context: ServerContext[OneShotPlan],
                     uploads: Sequence[Message]) -> dict[str, Any]:
        return server_step(context.plan, uploads, context.X_public, context.root,
                           context.known_classes, context.sums)

    def _after_fit(self, context: ServerContext[OneShotPlan], uploads: Sequence[Message],
                   data: FederatedData | None) -> None:
        if context.X_public is not None:
            warn_if_collapsed(context.plan, self._predict_codes(context.X_public),
                              self.classes_, context.sums)

    def _regressor_outputs(self, X: Any) -> np.ndarray:
        """A regressor final model's per-class outputs, shape (n_samples, n_classes)."""
        return np.asarray(self.final_estimator_.predict(X),
                          dtype=float).reshape(num_samples(X), -1)

    def _predict_codes(self, X: Any) -> np.ndarray:
        # the final model if distilled, else the ensemble
        if not self.distill:
            return self._proba(X).argmax(axis=1)
        if self._final_model is None:
            return self._regressor_outputs(X).argmax(axis=1)
        return self._final_model.predict(X)

    def _offers(self, method: str) -> bool:
        # the ensemble's or a classifier final model's probabilities; a regressor's
        # outputs as decision scores
        if not self.distill:
            return method == "predict_proba"
        final = final_template(self)
        if method == "predict_proba":
            return not is_regressor(final) and hasattr(final, "predict_proba")
        return is_regressor(final)

    def _proba(self, X: Any) -> np.ndarray:
        if not self.distill:
            return ensemble_proba(self._ensemble, X, len(self.classes_), self.voting)
        return self._final_model.predict_proba(X, len(self.classes_))

    def _decision_scores(self, X: Any) -> np.ndarray:
        # one output per class; for two classes the difference between them
        outputs = self._regressor_outputs(X)
        return outputs[:, 1] - outputs[:, 0] if len(self.classes_) == 2 else outputs
