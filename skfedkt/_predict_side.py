"""The predict side every federated classifier shares: `predict`, `predict_proba`,
`predict_log_proba` and `decision_function`, written once over four hooks."""

from __future__ import annotations

from abc import ABCMeta, abstractmethod
from typing import Any

import numpy as np
from sklearn.utils.metaestimators import available_if
from sklearn.utils.validation import check_is_fitted, validate_data

from ._engine._validation import _framed_like, _keep_frame, check_params
from ._shared_docs import shared_docs


def _if_offered(method):
    """available_if's check: whether the model offers `method`."""
    return lambda self: self._offers(method)


class PredictSide(metaclass=ABCMeta):
    """What a fitted federated classifier predicts, from its hooks: class codes
    (`_predict_codes`), probabilities (`_proba`), which methods it offers (`_offers`)
    and decision scores (`_decision_scores`), on rows validated as its fit's were."""

    classes_: np.ndarray

    @abstractmethod
    def _predict_codes(self, X: Any) -> np.ndarray:
        """Each row's predicted class code (an index into ``classes_``), from validated
        rows: what each algorithm's fitted model predicts."""

    def _offers(self, method: str) -> bool:
        """Whether the model offers `method` ("predict_proba" or "decision_function")."""
        return method == "predict_proba"

    @abstractmethod
    def _proba(self, X: Any) -> np.ndarray:
        """Class probabilities of validated rows, columns in the order of ``classes_``."""

    def _decision_scores(self, X: Any) -> np.ndarray:
        """Decision scores of validated rows, in scikit-learn's layout, where `_offers`
        says the model offers ``decision_function``."""
        raise NotImplementedError

    def _check_params(self):
        """How `validate_data` checks this estimator's rows (`check_params`)."""
        return check_params(self)

    def _validate_predict_data(self, X):
        X_valid = validate_data(self, X, reset=False, **self._check_params())
        if hasattr(self, "feature_names_in_"):
            return _framed_like(self.feature_names_in_, X, X_valid)
        return _keep_frame(X, X_valid)

    @shared_docs
    def predict(self, X):
        """Predict class labels for the rows of `X` with the fitted model (see the
        class's description: a final model, a student, or the parties' vote).

        Parameters
        ----------
        $predict_data

        Returns
        -------
        y : ndarray of shape (n_samples,)
            The predicted classes, among ``classes_``.
        """
        check_is_fitted(self)
        return self.classes_[self._predict_codes(self._validate_predict_data(X))]

    @available_if(_if_offered("predict_proba"))
    @shared_docs
    def predict_proba(self, X):
        """Class probabilities of the fitted model, one column per class of ``classes_``
        (see the class's description: a final model, a student, or the parties' vote).

        Parameters
        ----------
        $predict_data

        Returns
        -------
        proba : ndarray of shape (n_samples, n_classes)
            The class probabilities, columns in the order of ``classes_``; a class the
            model never learned has probability 0.
        """
        check_is_fitted(self)
        return self._proba(self._validate_predict_data(X))

    @available_if(_if_offered("predict_proba"))
    @shared_docs
    def predict_log_proba(self, X):
        """Logarithm of `predict_proba`.

        Parameters
        ----------
        $predict_data

        Returns
        -------
        log_proba : ndarray of shape (n_samples, n_classes)
            The log class probabilities, columns in the order of ``classes_``.
        """
        with np.errstate(divide="ignore"):
            return np.log(self.predict_proba(X))

    @available_if(_if_offered("decision_function"))
    @shared_docs
    def decision_function(self, X):
        """Decision scores of the fitted model, in scikit-learn's layout for ``classes_``.

        Parameters
        ----------
        $predict_data

        Returns
        -------
        scores : ndarray of shape (n_samples,) or (n_samples, n_classes)
            1-D for two classes (positive favours ``classes_[1]``); a class the model
            never learned scores ``-inf``.
        """
        check_is_fitted(self)
        return self._decision_scores(self._validate_predict_data(X))
