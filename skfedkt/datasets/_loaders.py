"""Federated datasets: train / public / test splits with the rows of train split by party."""

import csv
import warnings
from itertools import islice
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

from .._engine._compat import Interval, StrOptions, validate_params
from ._images import IMAGE_LOADERS
from ._partition import dirichlet_partition, iid_partition

BUNDLED = {
    "digits": load_digits,
    "breast_cancer": load_breast_cancer,
    "wine": load_wine,
    "iris": load_iris,
}
# the FedKT paper's tabular datasets (LIBSVM versions) and their OpenML ids
REAL = {"adult": 1590, "cod-rna": 351, "covtype": 1596}
# its image datasets (read from their distributed files, see _images.py) and OpenML ids
IMAGES = {"mnist": 554, "svhn": 41081, "cifar10": 40927}
# a CSV or LIBSVM file of one's own
OWN = "file"
DATASETS = sorted([*BUNDLED, "synthetic", *REAL, *IMAGES, OWN])


# how CSV files mark a missing feature value (UCI's census data uses "?")
MISSING_MARKERS = frozenset({"", "?", "na", "nan", "null"})


def load_local_file(path, *, labelled=True, text_features="error"):
    """Features and labels from a CSV file or an svmlight/LIBSVM file.

    A file whose first or second line holds a comma is read as CSV: one row per
    example, the label in the last column, blank lines skipped. A first line with no
    number in it, followed by one with numbers or by nothing, is a header (or a title,
    as in UCI's ``adult.test``) and is skipped. Fields are stripped of surrounding
    spaces; ``?``, ``NA``, ``nan``, ``null`` and an empty field are missing values
    (NaN). Every other file is read as svmlight/LIBSVM (``label index:value ...``), as
    the LIBSVM copies of adult (a9a), cod-rna and covtype are distributed. Labels may be
    text; labels that are whole numbers are returned as integers.

    Parameters
    ----------
    path : str or path-like
        The file.
    labelled : bool, default=True
        Whether the file holds labels. An unlabelled CSV (a public set) has features
        only; an unlabelled LIBSVM file's label field is ignored.
    text_features : {"error", "ordinal"}, default="error"
        What to do with a CSV feature column that holds text, such as the census
        data's ``workclass`` in UCI's ``adult.data``. ``"ordinal"`` codes its values
        0, 1, ... in sorted order (missing values stay NaN), which is consistent only
        within one file: use it for a whole dataset, never for one party's file, whose
        codes would not match the others'. A column of numbers with a few text cells is
        not coded but refused, naming the column, the row and the cell. ``"error"``
        raises a ValueError naming the column.

    Returns
    -------
    X : ndarray of shape (n_samples, n_features)
    y : ndarray of shape (n_samples,), or None if not `labelled`

    Examples
    --------
    >>> from pathlib import Path
    >>> from tempfile import TemporaryDirectory
    >>> from skfedkt.datasets import load_local_file
    >>> with TemporaryDirectory() as folder:
    ...     path = Path(folder) / "census.data"
    ...     _ = path.write_text("39, State-gov, <=50K\\n52, ?, >50K\\n31, Private, >50K\\n")
    ...     X, y = load_local_file(path, text_features="ordinal")
    >>> X
    array([[39.,  1.],
           [52., nan],
           [31.,  0.]])
    >>> y
    array(['<=50K', '>50K', '>50K'], dtype='<U5')
    """
    if text_features not in ("error", "ordinal"):
        raise ValueError(
            f"text_features must be 'error' or 'ordinal', got {text_features!r}."
        )
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"No data file at {path}.")
    try:
        with path.open(newline="") as handle:
            # a title line, as in UCI's adult.test, may come before the comma-separated rows
            leading = list(islice((line for line in handle if line.strip()), 2))
        if any("," in line for line in leading):
            X, y = _read_csv(path, labelled, text_features)
        else:
            X, y = _read_libsvm(path)
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path} is not a UTF-8 text file (CSV or LIBSVM): "
                         f"{str(exc).rstrip('.')}.") from exc
    if len(X) == 0:
        raise ValueError(f"No data rows in {path}.")
    if not labelled:
        return X, None
    if y.dtype.kind == "f" and np.array_equal(y, np.round(y)):
        y = y.astype(np.int64)
    if type_of_target(y) == "continuous":
        raise ValueError(
            f"The label column of {path} (the last column of a CSV, the first field of a "
            f"LIBSVM line) looks continuous: {len(np.unique(y))} distinct values such as "
            f"{y[0]:g}; FedKT classifies, so it needs class labels."
        )
    return X, y


def _as_numbers(values):
    """The column as floats (NaN where missing), or None if a value is text."""
    numbers = np.empty(len(values))
    for i, value in enumerate(values):
        if value.lower() in MISSING_MARKERS:
            numbers[i] = np.nan
            continue
        try:
            numbers[i] = float(value)
        except ValueError:
            return None
    return numbers


def _read_libsvm(path):
    try:
        X, y = load_svmlight_file(str(path))
    except ValueError as exc:
        raise ValueError(f"{path} is neither CSV nor LIBSVM: {exc}") from exc
    return X.toarray(), y


def _csv_rows(path):
    """The non-blank rows of a CSV file (fields stripped), and its header or None."""
    with path.open(newline="") as handle:
        rows = [[field.strip() for field in row]
                for row in csv.reader(handle) if any(field.strip() for field in row)]

    def holds_a_number(row):
        return any(_as_numbers([field]) is not None for field in row)

    # a header (or a title): no number in it, and numbers, if any, on the next row
    if rows and not holds_a_number(rows[0]) and (len(rows) == 1 or holds_a_number(rows[1])):
        return rows[1:], rows[0]
    return rows, None


def feature_names_of(path, *, labelled=True):
    """The feature columns a CSV file's header names (without the label column), or None
    for a file without a header or not a CSV file."""
    path = Path(path)
    try:
        rows, header = _csv_rows(path)
    except (OSError, UnicodeDecodeError, csv.Error):
        return None
    if header is None or (rows and len(rows[0]) != len(header)):
        return None  # a title line, not a header
    return header[:-1] if labelled else header


def _check_text_column(values, missing, index, path):
    """Refuse to code a column of numbers that holds a few text cells: coded, its
    numbers would become ranks in string order ("10" before "2"), silently."""
    is_text = np.array([_as_numbers([v]) is None for v in values])
    n_numbers = int(np.sum(~is_text & ~missing))
    if n_numbers > is_text.sum():
        rows = np.flatnonzero(is_text)
        raise ValueError(
            f"Column {index} of {path} holds numbers but for {len(rows)} cell(s): data row "
            f"{rows[0] + 1} holds {values[rows[0]]!r}. Correct the cell, or mark it missing "
            "(empty, ?, NA); only a column of text is coded as categories."
        )


def _read_csv(path, labelled, text_features):
    rows, _ = _csv_rows(path)
    if not rows:
        return np.empty((0, 0)), None
    width = len(rows[0])
    for line, row in enumerate(rows, start=1):
        if len(row) != width:
            raise ValueError(
                f"Data row {line} of {path} has {len(row)} fields, the first has {width}: "
                "every row needs the same columns."
            )
    columns = [list(column) for column in zip(*rows)]
    labels = None
    if labelled:
        label_texts = columns.pop()
        unlabelled = [row for row, label in enumerate(label_texts, start=1)
                      if label.lower() in MISSING_MARKERS]
        if unlabelled:
            raise ValueError(
                f"Data row {unlabelled[0]} of {path} has no label "
                f"({label_texts[unlabelled[0] - 1]!r} in the last column; unlabelled rows: "
                f"{len(unlabelled)}): drop them."
            )
        numeric = _as_numbers(label_texts)
        labels = np.array(label_texts) if numeric is None else numeric
    features = []
    for index, values in enumerate(columns):
        numbers = _as_numbers(values)
        if numbers is None:
            text = next(v for v in values if _as_numbers([v]) is None)
            if text_features == "error":
                raise ValueError(
                    f"Column {index} of {path} holds text (e.g. {text!r}); the models need "
                    "numbers. Encode it the same way in every party's file (e.g. one-hot "
                    "or an agreed list of codes)."
                )
            missing = np.array([v.lower() in MISSING_MARKERS for v in values])
            _check_text_column(values, missing, index, path)
            _, codes = np.unique(np.array(values)[~missing], return_inverse=True)
            numbers = np.full(len(values), np.nan)
            numbers[~missing] = codes
        features.append(numbers)
    X = np.column_stack(features) if features else np.empty((len(rows), 0))
    return X, labels


def _party_column(path, party_column):
    """The party of each row of the CSV file at `path`, from the column its header
    names `party_column`, and that column's place among the features."""
    names = feature_names_of(path)
    if names is None:
        raise ValueError(f"party_column={party_column!r} names a column of a CSV file's "
                         f"header, and {path} has none: add a header line, or leave "
                         "party_column out to split the rows into parties at random.")
    if party_column not in names:
        raise ValueError(f"party_column={party_column!r} is not a feature column of "
                         f"{path}; its header names {names} (the last column, "
                         "the label, cannot be the party).")
    index = names.index(party_column)
    rows, _ = _csv_rows(Path(path))
    parties = np.array([row[index] for row in rows])
    missing = np.flatnonzero([party.lower() in MISSING_MARKERS for party in parties])
    if len(missing):
        raise ValueError(f"Data row {missing[0] + 1} of {path} has no party in column "
                         f"{party_column!r} ({len(missing)} such rows): give every row "
                         "its party.")
    numeric = _as_numbers(list(parties))
    if numeric is not None and np.array_equal(numeric, np.round(numeric)):
        parties = numeric.astype(np.int64)
    return parties, index


def _load(name, *, path, n_samples, n_features, n_classes, random_state):
    if name == OWN:
        if path is None:
            raise ValueError(f"name={OWN!r} reads a CSV or LIBSVM file of your own: pass "
                             "its path (--data-path on the command line).")
        return load_local_file(path, text_features="ordinal")
    if name in BUNDLED:
        return BUNDLED[name](return_X_y=True)
    if name == "synthetic":
        return make_classification(
            n_samples=n_samples, n_features=n_features, n_informative=max(2, n_features // 2),
            n_classes=n_classes, random_state=random_state,
        )
    if path is not None and name in IMAGE_LOADERS:
        return IMAGE_LOADERS[name](path)
    if path is not None:
        # one file holds the whole dataset, so codes of text columns are consistent
        return load_local_file(path, text_features="ordinal")
    # needs the network; a local copy is read with `path`
    local_copy = ("the folder of its distributed files" if name in IMAGES
                  else "a local LIBSVM or CSV copy of it")
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="A network error occurred")
            X, y = fetch_openml(data_id={**REAL, **IMAGES}[name], return_X_y=True,
                                as_frame=False)
    except OSError as exc:  # URLError and its kin, e.g. offline
        raise OSError(
            f"Could not download {name!r} from OpenML ({exc}). Without the network, pass "
            f"{local_copy} as path (--data-path on the command line)."
        ) from exc
    X = np.asarray(X.toarray() if hasattr(X, "toarray") else X, dtype=float)
    if name in IMAGES:  # pixels in [0, 1], as the local files give them
        return (X / 255).astype(np.float32), np.asarray(y).astype(np.int64)
    return X, y


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
        "party_column": [str, None],
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
    party_column=None,
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
"covtype", "mnist", "svhn", "cifar10", "file"}
        The bundled scikit-learn datasets and ``"synthetic"`` (``make_classification``)
        work offline. ``"file"`` is a CSV or LIBSVM file of your own at `path`, read by
        `load_local_file` (the label in the last column, text columns coded). ``"adult"`` (a9a), ``"cod-rna"`` and ``"covtype"``, the paper's
        tabular datasets, are read from `path` when given (LIBSVM or CSV, see
        `load_local_file`), else fetched from OpenML, which needs the network. So are
        its image datasets ``"mnist"``, ``"svhn"`` and ``"cifar10"``, whose `path` is
        the folder of their distributed files (MNIST's four IDX files, gzipped or not;
        SVHN's ``train_32x32.mat`` and ``test_32x32.mat``; CIFAR-10's binary batches,
        never its pickled python version): training and test rows are pooled before the
        split, pixels scaled to [0, 1] and flattened, channels last.
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
        Local file for the real datasets and ``"file"``.
    party_column : str, default=None
        With ``"file"``: the column of the CSV file's header that names each row's
        party. Its rows keep their parties (`n_parties`, `beta`, `partition` and
        `min_party_size` are then unused), the column is not a feature, and the public
        and test rows are drawn from every party's rows. None splits the training rows
        into parties as `partition` says.
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
    if path is not None and name not in REAL and name not in IMAGES and name != OWN:
        raise ValueError(f"path is for the real datasets {sorted([*REAL, *IMAGES])} and "
                         f"{OWN!r}, not {name!r}.")
    if party_column is not None and name != OWN:
        raise ValueError(f"party_column names a column of your own file (name={OWN!r}), "
                         f"not of {name!r}.")
    if public_fraction + test_fraction >= 1:
        raise ValueError(
            f"public_fraction + test_fraction = {public_fraction + test_fraction:g} leaves "
            "no training rows."
        )
    rng = check_random_state(random_state)
    X, y = _load(name, path=path, n_samples=n_samples, n_features=n_features,
                 n_classes=n_classes, random_state=rng)
    parties = np.zeros(len(y), dtype=np.int64)
    if party_column is not None:
        parties, index = _party_column(path, party_column)
        X = np.delete(X, index, axis=1)
    try:
        X_train, X_rest, y_train, y_rest, parties_train, _ = train_test_split(
            X, y, parties, test_size=public_fraction + test_fraction, stratify=y,
            random_state=rng)
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
    if party_column is not None:
        groups = parties_train
    elif n_parties > len(y_train):
        raise ValueError(
            f"Cannot split {len(y_train)} training rows of {name!r} into {n_parties} parties."
        )
    elif partition == "iid":
        groups = iid_partition(len(y_train), n_parties, random_state=rng)
    else:
        groups = dirichlet_partition(y_train, n_parties, beta=beta,
                                     min_party_size=min_party_size, random_state=rng)
    return Bunch(X_train=X_train, y_train=y_train, groups=groups, X_public=X_public,
                 X_test=X_test, y_test=y_test, name=name)
