"""Model files: what a server writes once fitted and anyone may load, without pickle.

A model file may hold the registered algorithms' classes, as their declarations name
them (`skfedkt._registry.trusted_model_types`): this module lists none."""

import zipfile

from ._deployment._archive import check_limits, read_file
from ._deployment._local_files import write_atomically
from ._deployment._upload import _load_skops, _type_names
from ._engine._class_codes import ClassCodeModel
from ._registry import trusted_model_types


def save_model(estimator, path):
    """Write a fitted estimator with skops: the model a server sends back.

    Parameters
    ----------
    estimator : estimator
        The fitted estimator, e.g. the result of ``fit_server``.
    path : str or path-like
        The file to write.

    Returns
    -------
    n_bytes : int
        The file's size.

    Examples
    --------
    >>> import os, tempfile
    >>> from sklearn.datasets import load_iris
    >>> from skfedkt import OneShotEnsembleClassifier, load_model, save_model
    >>> X, y = load_iris(return_X_y=True)
    >>> clf = OneShotEnsembleClassifier(random_state=0).fit(X, y, groups=y % 2)
    >>> path = os.path.join(tempfile.mkdtemp(), "model.skops")
    >>> save_model(clf, path) > 0
    True
    >>> bool((load_model(path).predict(X) == clf.predict(X)).all())
    True
    """
    import skops.io  # two seconds to import: only where a model is written

    return write_atomically(path, skops.io.dumps(estimator, compression=zipfile.ZIP_DEFLATED))


def load_model(path, *, trusted=(), limits=None):
    """Load a model file of `save_model` without pickle.

    Parameters
    ----------
    path : str or path-like
        The file.
    trusted : sequence of str, default=()
        Type names to load beyond skfedkt's estimators, scikit-learn's and XGBoost's,
        e.g. a skorch net's (loading runs their code).
    limits : UploadLimits, default=None
        Bounds on the file (see `read_upload`); None means ``UploadLimits()``.

    Returns
    -------
    estimator : estimator
        The fitted estimator.

    Raises
    ------
    UploadError
        For a file skops cannot read, beyond `limits`, holding types that are not
        trusted, or whose trees or boosters are malformed.
    """
    trusted = _type_names(trusted)
    limits = check_limits(limits)
    data = read_file(path, str(path), limits)
    allowed = _model_file_types()
    return _load_skops(data, str(path), trusted, limits, allowed=allowed)


def _model_file_types():
    """The classes a model file may hold beyond scikit-learn's and XGBoost's: those the
    registered algorithms declare, and the engine's class-code wrapper; classes by
    name, never a name prefix (a prefix would admit the package's functions too)."""
    return {f"{cls.__module__}.{cls.__qualname__}"
            for cls in (ClassCodeModel, *trusted_model_types())}
