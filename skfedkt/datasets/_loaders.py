"""Federated datasets: train / public / test splits with the rows of train split by party."""

import warnings
from numbers import Integral, Real
from pathlib import Path

import numpy as np
from sklearn.datasets import (
    fetch_openml,
    load_breast_cancer,
    load_digits,
    load_iris,
    load_svmlight_file,
    load_wine,
    make_classification,
)
from sklearn.model_selection import train_test_split
from sklearn.utils import Bunch, check_random_state
from sklearn.utils.multiclass import type_of_target
from sklearn.utils._param_validation import Interval, StrOptions, validate_params

from ._partition import dirichlet_partition, iid_partition

BUNDLED = {
    "digits": load_digits,
    "breast_cancer": load_breast_cancer,
    "wine": load_wine,
    "iris": load_iris,
}
# the FedKT paper's tabular datasets (LIBSVM versions) and their OpenML ids
REAL = {"adult": 1590, "cod-rna": 351, "covtype": 1596}
DATASETS = sorted([*BUNDLED, "synthetic", *REAL])


def load_local_file(path, *, labelled=True):
    """Features and labels from an svmlight/LIBSVM file or a numeric CSV file.

    CSV files hold one row per example, numbers only, the label in the last column; a
    first line that does not parse as numbers is taken as a header. Every other file is
    read as svmlight/LIBSVM (``label index:value ...``), as the LIBSVM copies of adult
    (a9a), cod-rna and covtype are distributed. Labels that are whole numbers are
    returned as integers.

    Parameters
    ----------
    path : str or path-like
        The file.
    labelled : bool, default=True
        Whether the file holds labels. An unlabelled CSV (a public set) has features
        only; an unlabelled LIBSVM file's label field is ignored.

    Returns
    -------
    X : ndarray of shape (n_samples, n_features)
    y : ndarray of shape (n_samples,), or None if not `labelled`
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"No data file at {path}.")
    if path.suffix.lower() == ".csv":
        with path.open() as handle:
            first = handle.readline()
        try:
            np.array(first.strip().split(","), dtype=float)
            skip = 0
        except ValueError:
            skip = 1
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # numpy: "input contained no data"
            table = np.loadtxt(path, delimiter=",", skiprows=skip, ndmin=2)
        X, y = (table[:, :-1], table[:, -1]) if labelled else (table, None)
    else:
        X, y = load_svmlight_file(str(path))
        X = X.toarray()
    if len(X) == 0:
        raise ValueError(f"No data rows in {path}.")
    if not labelled:
        return X, None
    if np.array_equal(y, np.round(y)):
        y = y.astype(np.int64)
    if type_of_target(y) == "continuous":
        raise ValueError(
            f"The label column of {path} (the last column of a CSV, the first field of a "
            f"LIBSVM line) looks continuous: {len(np.unique(y))} distinct values such as "
            f"{y[0]:g}; FedKT classifies, so it needs class labels."
        )
    return X, y


def _load(name, *, path, n_samples, n_features, n_classes, random_state):
    if name in BUNDLED:
        return BUNDLED[name](return_X_y=True)
    if name == "synthetic":
        return make_classification(
            n_samples=n_samples, n_features=n_features, n_informative=max(2, n_features // 2),
            n_classes=n_classes, random_state=random_state,
        )
    if path is not None:
        return load_local_file(path)
    # needs the network; a local copy is read with `path`
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="A network error occurred")
            X, y = fetch_openml(data_id=REAL[name], return_X_y=True, as_frame=False)
    except OSError as exc:  # URLError and its kin, e.g. offline
        raise OSError(
            f"Could not download {name!r} from OpenML ({exc}). Without the network, pass "
            "a local LIBSVM or CSV copy of it as path (--data-path on the command line)."
        ) from exc
    return np.asarray(X.toarray() if hasattr(X, "toarray") else X, dtype=float), y


@validate_params(
    {
        "name": [StrOptions(set(DATASETS))],
        "n_parties": [Interval(Integral, 1, None, closed="left")],
        "beta": [Interval(Real, 0, None, closed="neither")],
        "partition": [StrOptions({"dirichlet", "iid"})],
        "public_fraction": [Interval(Real, 0, 1, closed="neither")],
        "test_fraction": [Interval(Real, 0, 1, closed="neither")],
        "min_party_size": [Interval(Integral, 1, None, closed="left")],
        "path": [str, Path, None],
        "n_samples": [Interval(Integral, 10, None, closed="left")],
        "n_features": [Interval(Integral, 2, None, closed="left")],
        "n_classes": [Interval(Integral, 2, None, closed="left")],
        "random_state": ["random_state"],
    },
    prefer_skip_nested_validation=True,
)
def load_federated(
    name,
    *,
    n_parties=10,
    beta=0.5,
    partition="dirichlet",
    public_fraction=0.125,
    test_fraction=0.125,
    min_party_size=10,
    path=None,
    n_samples=10000,
    n_features=20,
    n_classes=2,
    random_state=None,
):
    """A dataset split as in the FedKT paper: parties' training rows, public and test sets.

    The rows are split at random, stratified by label, into train / public / test
    (75% / 12.5% / 12.5% by default, the paper's protocol for tabular data); the
    training rows are then assigned to parties by `dirichlet_partition` (label skew) or
    `iid_partition`. The public rows come without labels.

    Parameters
    ----------
    name : {"digits", "breast_cancer", "wine", "iris", "synthetic", "adult", "cod-rna", \
"covtype"}
        The bundled scikit-learn datasets and ``"synthetic"`` (``make_classification``)
        work offline. ``"adult"`` (a9a), ``"cod-rna"`` and ``"covtype"``, the paper's
        tabular datasets, are read from `path` when given (LIBSVM or CSV, see
        `load_local_file`), else fetched from OpenML, which needs the network.
    n_parties : int, default=10
        Number of parties.
    beta : float, default=0.5
        Dirichlet concentration of the label skew (``partition="dirichlet"``).
    partition : {"dirichlet", "iid"}, default="dirichlet"
        How training rows are assigned to parties.
    public_fraction, test_fraction : float, default=0.125
        Shares of all rows held out as the public set and the test set.
    min_party_size : int, default=10
        Smallest party of a Dirichlet partition.
    path : str or path-like, default=None
        Local file for the real datasets.
    n_samples, n_features, n_classes : int, default=10000, 20, 2
        Size of the ``"synthetic"`` dataset.
    random_state : int, RandomState instance or None, default=None
        Controls the synthetic data, the splits and the partition.

    Returns
    -------
    data : Bunch
        ``X_train``, ``y_train``, ``groups`` (the party of each training row), ``X_public``,
        ``X_test``, ``y_test`` and ``name``.

    Examples
    --------
    >>> import numpy as np
    >>> from skfedkt.datasets import load_federated
    >>> data = load_federated("breast_cancer", n_parties=5, random_state=0)
    >>> data.X_train.shape, data.X_public.shape, data.X_test.shape
    ((426, 30), (71, 30), (72, 30))
    >>> np.unique(data.groups)
    array([0, 1, 2, 3, 4])
    """
    if path is not None and name not in REAL:
        raise ValueError(f"path is for the real datasets {sorted(REAL)}, not {name!r}.")
    if public_fraction + test_fraction >= 1:
        raise ValueError(
            f"public_fraction + test_fraction = {public_fraction + test_fraction:g} leaves "
            "no training rows."
        )
    rng = check_random_state(random_state)
    X, y = _load(name, path=path, n_samples=n_samples, n_features=n_features,
                 n_classes=n_classes, random_state=rng)
    try:
        X_train, X_rest, y_train, y_rest = train_test_split(
            X, y, test_size=public_fraction + test_fraction, stratify=y, random_state=rng
        )
        X_public, X_test, _, y_test = train_test_split(
            X_rest, y_rest, test_size=test_fraction / (public_fraction + test_fraction),
            stratify=y_rest, random_state=rng,
        )
    except ValueError as exc:
        raise ValueError(
            f"Cannot split the {len(y)} rows of {name!r} into training, public and test "
            f"rows that each hold every class ({exc}); use more rows (n_samples for "
            "'synthetic') or larger public_fraction and test_fraction."
        ) from exc
    if n_parties > len(y_train):
        raise ValueError(
            f"Cannot split {len(y_train)} training rows of {name!r} into {n_parties} parties."
        )
    if partition == "iid":
        groups = iid_partition(len(y_train), n_parties, random_state=rng)
    else:
        groups = dirichlet_partition(y_train, n_parties, beta=beta,
                                     min_party_size=min_party_size, random_state=rng)
    return Bunch(X_train=X_train, y_train=y_train, groups=groups, X_public=X_public,
                 X_test=X_test, y_test=y_test, name=name)
