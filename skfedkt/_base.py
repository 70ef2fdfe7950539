"""The base class of the federated meta-estimators: validation, tags, prediction, and the
preambles of every algorithm's deployed steps (`fit_party`, `fit_server`)."""

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, MetaEstimatorMixin
from sklearn.utils import get_tags
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, validate_data

from ._deployment._protocol import PartyData, require_public_set, server_expectations
from ._engine._validation import (
    FederatedData,
    _check_groups,
    _framed_like,
    _keep_frame,
    _warn_if_groups_lost_to_a_splitter,
    _warn_if_public_shifted,
)

# parameter descriptions that several methods share, substituted for "$name" lines
_SHARED_DOCS = {
    "fit_data": """\
X : {array-like, sparse matrix, DataFrame} of shape (n_samples, n_features)
    The training rows of all parties.
y : array-like of shape (n_samples,)
    Their labels (any type: strings, integers, booleans).
groups : array-like of shape (n_samples,), default=None
    The party of each row. ``None`` means a single party.""",
    "public_set": """\
X_unlabeled : {array-like, sparse matrix, DataFrame} or PublicSet, default=None
    The public unlabelled data, of shape (n_public, n_features). ``None`` uses the
    rows of `X` without labels (no privacy). Wrap it in `PublicSet` inside
    cross-validation when it may have exactly as many rows as `X`.""",
    "party_data": """\
X : {array-like, sparse matrix, DataFrame} of shape (n_samples, n_features)
    The party's rows.
y : array-like of shape (n_samples,)
    Their labels, all among `classes`.
party : str or int
    The party's name, as the server will know it.
classes : array-like of shape (n_classes,)
    The class labels every party and the server agreed on.""",
    "uploads": """\
uploads : list of str, path-like, bytes or PartyUpload
    The parties' upload files.""",
    "upload_checks": """\
classes : array-like, default=None
    The agreed classes; ``None`` takes those of most uploads, and refuses the
    others naming them.
trusted : sequence of str, default=()
    Type names to load beyond scikit-learn's and XGBoost's (see
    `skfedkt.read_upload`).
min_parties : int, default=None
    If given, uploads that fail a check are left out (with a warning, and in
    ``left_out_parties_``) as long as this many parties remain; if None, any
    failure raises.
limits : skfedkt.UploadLimits, default=None
    Bounds on every file read (size, inflated size, manifest, payload objects);
    None means ``UploadLimits()``.""",
}


def shared_docs(method):
    """Put the shared parameter descriptions into `method`'s docstring: a line holding
    only ``$name`` becomes ``_SHARED_DOCS[name]`` at that line's indentation."""
    lines = []
    for line in method.__doc__.splitlines():
        name = line.strip()[1:]
        if line.strip().startswith("$") and name in _SHARED_DOCS:
            indent = line[: len(line) - len(line.lstrip())]
            lines += [indent + part for part in _SHARED_DOCS[name].splitlines()]
        else:
            lines.append(line)
    method.__doc__ = "\n".join(lines)
    return method


class BaseFederatedClassifier(ClassifierMixin, MetaEstimatorMixin, BaseEstimator):
    """Base class of the federated meta-estimators.

    Subclasses list their base estimators in `_base_estimators` and name the plan of
    their fit in `_plan_type`; this class validates ``X``, ``y``, ``groups`` and
    ``X_unlabeled`` against what all of them accept, encodes the labels, splits the rows
    by party, and runs the checks that open every deployed step.
    """

    # the algorithm's `Plan`: its parameters, resolved and checked before any work
    _plan_type = None

    # requested by default so that metadata routing sends them to fit
    __metadata_request__fit = {"groups": True, "X_unlabeled": True}

    def _base_estimators(self):
        """The (unfitted) estimators whose input requirements this estimator inherits."""
        raise NotImplementedError

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        # fit reports estimators that are not estimators; tags need not fail on them
        base_tags = [get_tags(estimator) for estimator in self._base_estimators()
                     if hasattr(estimator, "fit")]
        tags.input_tags.sparse = all(t.input_tags.sparse for t in base_tags)
        tags.input_tags.allow_nan = all(t.input_tags.allow_nan for t in base_tags)
        return tags

    # private attributes a fit sets, beyond the public ones that end in "_"
    _private_fitted = ()

    def _clear_fitted_state(self):
        """Forget everything an earlier fit set, before a new one sets its own: a refit
        with other options leaves no attribute of the earlier one behind."""
        # only names this package owns: scikit-learn keeps private state of its own
        # (callback contexts, metadata requests, output configuration)
        for name in list(vars(self)):
            if (name.endswith("_") and not name.startswith("_")
                    or name in self._private_fitted):
                delattr(self, name)

    # parameters that take the package's parameter objects, which check their own
    _parameter_objects = ()

    def _validate_params(self):
        super()._validate_params()
        for name in self._parameter_objects:
            value = getattr(self, name)
            if isinstance(value, BaseEstimator):
                value._validate_params()

    def _check_params(self):
        input_tags = get_tags(self).input_tags
        return dict(
            accept_sparse=["csr", "csc"] if input_tags.sparse else False,
            ensure_all_finite="allow-nan" if input_tags.allow_nan else True,
            # mixed-type DataFrames go through to a base Pipeline untouched
            dtype=None,
        )

    def _validate_federated_data(self, X, y, groups, X_unlabeled):
        """Validate the inputs of ``fit``; set ``classes_``, ``parties_``, ``n_features_in_``."""
        check_params = self._check_params()
        X_valid, y = validate_data(self, X, y, **check_params)
        check_classification_targets(y)
        self.classes_, y_codes = np.unique(y, return_inverse=True)

        if groups is None:
            _warn_if_groups_lost_to_a_splitter(type(self).__name__)
            groups = np.zeros(len(y_codes), dtype=np.int64)
        else:
            groups = _check_groups(groups, len(y_codes))
        self.parties_, party_codes = np.unique(groups, return_inverse=True)
        # one stable sort: each party's rows in ascending order
        party_rows = np.split(np.argsort(party_codes, kind="stable"),
                              np.cumsum(np.bincount(party_codes))[:-1])

        X = _keep_frame(X, X_valid)
        if X_unlabeled is None:
            X_public = X
        else:
            if isinstance(X_unlabeled, tuple):
                if len(X_unlabeled) != 1:
                    raise ValueError(
                        "X_unlabeled given as a tuple must hold exactly one element, the "
                        f"public data (see PublicSet); got {len(X_unlabeled)} elements."
                    )
                X_unlabeled = X_unlabeled[0]
            try:
                public_valid = validate_data(self, X_unlabeled, reset=False, **check_params)
            except (ValueError, TypeError) as exc:
                # e.g. sparse public data for a dense-only base estimator (a TypeError)
                raise type(exc)(f"Invalid X_unlabeled: {exc}") from exc
            _warn_if_public_shifted(X_valid, public_valid)
            X_public = (_framed_like(X.columns, X_unlabeled, public_valid)
                        if hasattr(X, "iloc") else _keep_frame(X_unlabeled, public_valid))
        return FederatedData(X=X, y=y_codes, party_rows=party_rows, X_public=X_public)

    def _fit_inputs(self, X, y, groups, X_unlabeled):
        """The plan (its options refused before any work) and the validated data, at
        the start of `fit`, which forgets any earlier fit."""
        plan = self._plan_type.of(self)
        self._clear_fitted_state()
        return plan, self._validate_federated_data(X, y, groups, X_unlabeled)

    def _party_inputs(self, X, y, party, classes, X_unlabeled, public_step=None):
        """The plan and the party's validated data (`PartyData`), at the start of
        `fit_party`; `public_step` names the step where the public set is required."""
        self._validate_params()
        plan = self._plan_type.of(self)
        if public_step is not None:
            require_public_set(X_unlabeled, public_step)
        return plan, PartyData(self, X, y, classes, X_unlabeled, party)

    def _server_inputs(self, X_unlabeled, classes, public_step=None):
        """The plan, what every upload's manifest must say, and the validated public
        set, at the start of `fit_server`, which forgets any earlier fit;
        `public_step` names the step where the public set is required."""
        self._validate_params()
        self._clear_fitted_state()
        plan = self._plan_type.of(self)
        if public_step is not None:
            require_public_set(X_unlabeled, public_step)
        return (plan, *server_expectations(self, X_unlabeled, classes))

    def _set_server_fit(self, fitted, uploads, classes, left_out):
        """Every fitted attribute at once, at the end of `fit_server`: the server step's
        `fitted` ones, and what the collected `uploads` say."""
        vars(self).update(
            fitted, classes_=classes, left_out_parties_=left_out,
            parties_=np.array([upload.party for upload in uploads]),
            upload_bytes_=np.array([upload.n_bytes for upload in uploads]),
        )

    def _validate_predict_data(self, X):
        X_valid = validate_data(self, X, reset=False, **self._check_params())
        if hasattr(self, "feature_names_in_"):
            return _framed_like(self.feature_names_in_, X, X_valid)
        return _keep_frame(X, X_valid)

    def _predict_codes(self, X):
        """Each row's predicted class code (an index into ``classes_``), from validated
        rows: what each algorithm's fitted model predicts."""
        raise NotImplementedError

    def predict(self, X):
        """Predict class labels for the rows of `X` with the fitted model (see the
        class's description: a final model, a student, or the parties' vote).

        Parameters
        ----------
        X : {array-like, sparse matrix, DataFrame} of shape (n_samples, n_features)
            The input samples.

        Returns
        -------
        y : ndarray of shape (n_samples,)
            The predicted classes, among ``classes_``.
        """
        check_is_fitted(self)
        return self.classes_[self._predict_codes(self._validate_predict_data(X))]
