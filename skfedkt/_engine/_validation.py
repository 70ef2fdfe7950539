"""Validation of what a fit receives (rows, labels, parties, public set) and the
warnings every algorithm gives about it and about the classes its models lose."""

import os
import sys
import warnings
import weakref
from dataclasses import dataclass
from types import FrameType
from typing import Optional

import re

import numpy as np
import scipy.sparse as sp
from sklearn import get_config
from sklearn.utils import get_tags
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import validate_data

# classes below this share of the rows behind a model are not missed when it drops them
_MIN_CLASS_SHARE = 0.05
# a public set with a quarter of its feature means further than this many training
# standard deviations from the training means is almost surely in another feature space
_SHIFT_WARNING_STDS = 5.0
# what to do when a vote of skewed parties predicts a single class or loses classes
_SKEWED_PARTIES_REMEDY = (
    "under strong label skew the parties' models favour their own majority classes. "
    "Inspect the parties' class mixes, or use a larger public set or a model that predicts "
    "probabilities."
)


# what mends labels that collapse when the public set lies far from the training rows,
# where a larger public set of the same kind or other teachers would not
SHIFTED_PUBLIC_SET_REMEDY = (
    "The public set lies far from X (see the warning 'X_unlabeled is far from X'): the "
    "models label rows unlike those they learned, which neither a larger public set of "
    "the same kind nor other settings mend. Transform the public set as X is "
    "transformed"
)


def parties_in_words(n):
    """``n`` parties, in words: "1 party", "3 parties"."""
    return f"{n} part{'y' if n == 1 else 'ies'}"


def _lost_classes(learned, reference, ratio=0.5):
    """Classes holding at least `_MIN_CLASS_SHARE` of `reference` but under `ratio` of
    that share in `learned` (both arrays of class shares)."""
    return np.flatnonzero((reference >= _MIN_CLASS_SHARE) & (learned < ratio * reference))


class AssumptionWarning(UserWarning):
    """`fit` assumed what it was not told: with ``groups=None`` that every row is one
    party's, with ``X_unlabeled=None`` (FedKT, FedCT) that the training rows, without
    their labels, are the public set, so that nothing is private. Or it was given a
    federation that is hardly one: ``groups`` that name a single party (centralized
    training), or parties of fewer than 10 rows, whose models learn little from them
    though each weighs in the vote as a large party's do.

    Raised once per fit, naming the argument to pass; inside scikit-learn's
    cross-validation (``GridSearchCV``, ``cross_validate`` ...) once per search. Filter
    it, as any warning, with ``warnings.filterwarnings("ignore",
    category=skfedkt.AssumptionWarning)`` where the assumption is meant.
    """


class LabelCollapseWarning(UserWarning):
    """Labels that a model learns from lost classes that its training rows hold.

    Raised by `FedKTClassifier.fit` when a student's labels, or the server's labels for
    the final model, hold a single class or under-represent a class badly compared with
    the rows behind them (the class shares of every tier are in ``class_shares_``), or
    when its final model predicts one class, or a class under half or over twice its
    share of its labels; by `FedCTClassifier.fit` and `OneShotEnsembleClassifier.fit`
    when their vote predicts on the public set one class, or a class under half or over
    twice its share of the training rows (for classes of at least 5%).
    """


class PublicSet(tuple):
    """The public set, wrapped so that cross-validation keeps it whole.

    scikit-learn slices every fit parameter whose length equals the number of training
    samples when it splits data for cross-validation (``GridSearchCV``,
    ``cross_validate``): a public set that happens to have exactly ``len(X)`` rows would
    arrive as ``X_unlabeled[train]``. ``PublicSet(X_public)`` is a 1-tuple, so its length
    is 1 and it always arrives whole; a plain tuple ``(X_public,)`` is accepted likewise.
    ``Pipeline(..., transform_input=["X_unlabeled"])`` transforms its element.

    Parameters
    ----------
    X_public : {array-like, sparse matrix, DataFrame} of shape (n_public, n_features)
        The public, unlabelled examples.

    Examples
    --------
    >>> import numpy as np
    >>> from skfedkt import PublicSet
    >>> public = PublicSet(np.zeros((3, 2)))
    >>> len(public), public.data.shape
    (1, (3, 2))
    """

    def __new__(cls, X_public):
        return super().__new__(cls, (X_public,))

    def __getnewargs__(self):
        return (self[0],)

    @property
    def data(self):
        """The wrapped public set."""
        return self[0]

    def __repr__(self):
        return f"PublicSet(<{type(self[0]).__name__} with {len(self[0])} rows>)"


@dataclass
class FederatedData:
    """Validated training data, split by party.

    Attributes
    ----------
    X : array-like, sparse matrix or DataFrame
        Training rows; a DataFrame stays a DataFrame so column names survive slicing.
    y : ndarray of int64
        Class codes, indices into `classes`.
    classes : ndarray
        The class labels, sorted.
    parties : list
        The party names, sorted.
    party_rows : list of ndarray of int
        Row indices of each party, aligned with `parties`.
    X_public : array-like, sparse matrix or DataFrame
        The public set (the rows of `X` when none was given).
    public_set_shifted : bool
        Whether the public set lies far from `X` (fit warned so): advice that assumes
        a public set like the training rows does not apply.
    """

    X: object
    y: np.ndarray
    classes: np.ndarray
    parties: list
    party_rows: list
    X_public: object
    public_set_shifted: bool = False

    # every party's rows in one process (a party's own machine holds `PartyData`)
    pooled = True


def _column_moments(X, block_rows=65536):
    """Each column's number of non-NaN values, mean and standard deviation, in one pass
    over blocks of rows (Chan et al.'s pairwise update): memory of one block, not of X."""
    count = np.zeros(X.shape[1])
    mean = np.zeros(X.shape[1])
    sum_sq = np.zeros(X.shape[1])  # of deviations from the mean
    for start in range(0, X.shape[0], block_rows):
        block = np.asarray(X[start : start + block_rows], dtype=np.float64)
        present = ~np.isnan(block)
        block_count = present.sum(axis=0)
        filled = np.where(present, block, 0.0)
        block_mean = filled.sum(axis=0) / np.maximum(block_count, 1)
        block_sum_sq = (np.where(present, block - block_mean, 0.0) ** 2).sum(axis=0)
        total = count + block_count
        delta = block_mean - mean
        mean = mean + delta * block_count / np.maximum(total, 1)
        sum_sq = sum_sq + block_sum_sq + delta**2 * count * block_count / np.maximum(total, 1)
        count = total
    with np.errstate(invalid="ignore", divide="ignore"):
        return count, np.where(count > 0, mean, np.nan), np.sqrt(sum_sq / count)


def _public_set_shift(X, X_public):
    """The share of the features in which the public set's mean lies over
    `_SHIFT_WARNING_STDS` training standard deviations from the training rows' mean,
    and the largest such distance; None for rows this cannot compare (sparse, text)."""
    if sp.issparse(X) or sp.issparse(X_public) or not all(
        np.issubdtype(a.dtype, np.number) for a in (X, X_public)
    ):
        return None
    _, mean, std = _column_moments(X)
    _, public_mean, _ = _column_moments(X_public)
    with np.errstate(invalid="ignore", divide="ignore"):
        z = np.abs(public_mean - mean)[std > 0] / std[std > 0]
    z = z[np.isfinite(z)]
    return (np.mean(z > _SHIFT_WARNING_STDS), z.max()) if z.size else None


def _warn_if_public_shifted(X, X_public):
    """Warn, once per fit or search, when the public set lies far from the training
    rows, feature by feature (a public set left unscaled beside scaled rows, say);
    returns whether it does."""
    shift = _public_set_shift(X, X_public)
    if shift is None or shift[0] < 0.25:
        return False
    if _first_in_this_search(_warned_shift_searches, _warned_shift_in_this_process,
                             _running_search()):
        warnings.warn(
            f"X_unlabeled is far from X: in {shift[0]:.0%} of the features the public "
            f"set's mean lies over {_SHIFT_WARNING_STDS:g} training standard deviations "
            f"from the training rows' mean (up to {shift[1]:.3g}). The models learn X and "
            "label the public set: transform both alike (the same scaling, the same "
            "features).",
            UserWarning,
            stacklevel=_stacklevel_of_the_caller(),
        )
    return True


def _pipelines_around(estimator):
    """The scikit-learn Pipelines on the call stack whose last step is `estimator`,
    directly or through pipelines nested as last steps: those fitting it now."""
    from sklearn.pipeline import Pipeline

    found: list[Pipeline] = []
    frame: Optional[FrameType] = sys._getframe(1)
    while frame is not None:
        owner = frame.f_locals.get("self")
        if isinstance(owner, Pipeline) and all(owner is not other for other in found):
            last = owner
            while isinstance(last, Pipeline) and last.steps:
                last = last.steps[-1][1]
            if last is estimator:
                found.append(owner)
        frame = frame.f_back
    return found


def refuse_an_untransformed_public_set(estimator, X_unlabeled):
    """Refuse, before any work, a public set that a Pipeline fitting `estimator` leaves
    untransformed while its earlier steps transform X: the models would learn the
    transformed rows and label raw public rows (near chance, with every model's labels
    collapsing)."""
    if X_unlabeled is None:
        return
    routing = get_config()["enable_metadata_routing"]
    for pipeline in _pipelines_around(estimator):
        transforming = [name for name, step in pipeline.steps[:-1]
                        if step is not None and not isinstance(step, str)]  # "passthrough"
        transformed = routing and "X_unlabeled" in (pipeline.transform_input or ())
        if not transforming or transformed:
            continue
        name = type(estimator).__name__
        raise ValueError(
            f"{name} is the last step of a Pipeline whose steps {transforming} transform X "
            "but not X_unlabeled: its models would learn transformed rows and label raw "
            "public rows. Turn metadata routing on, sklearn.set_config("
            "enable_metadata_routing=True), build the pipeline with "
            "transform_input=['X_unlabeled'] (Pipeline(steps, transform_input=...) or "
            "make_pipeline(..., transform_input=...)), and pass groups= and X_unlabeled= "
            "to fit, or to GridSearchCV's fit, without a step prefix. Or put the "
            "preprocessing inside the base estimator, where each party fits its own."
        )


# the searches (or the estimators a cross_validate call was given) already warned about,
# for the assumptions and for a public set far from X
_warned_searches: "weakref.WeakSet[object]" = weakref.WeakSet()
_warned_shift_searches: "weakref.WeakSet[object]" = weakref.WeakSet()
# in a worker process of a parallel search, where the search itself is out of reach
_warned_in_this_process: list[bool] = []
_warned_shift_in_this_process: list[bool] = []

_CROSS_VALIDATORS = ("cross_validate", "cross_val_score", "cross_val_predict",
                     "learning_curve", "validation_curve", "permutation_test_score")


def _running_search():
    """The scikit-learn search, or the estimator a cross_validate-like call was given,
    that is fitting us; True inside cross-validation whose caller is out of reach (a
    worker process); None outside cross-validation."""
    search = None
    frame: Optional[FrameType] = sys._getframe(2)
    while frame is not None:
        code = frame.f_code
        if "model_selection" in code.co_filename:
            local = frame.f_locals
            owner = local.get("self")
            if code.co_name in _CROSS_VALIDATORS:
                search = local.get("estimator", search)
            elif owner is not None and hasattr(owner, "cv") and hasattr(owner, "fit"):
                search = owner
            elif search is None and code.co_name == "_fit_and_score":
                search = True
        frame = frame.f_back
    return search


def _first_in_this_search(warned_searches, warned_in_this_process, search):
    """Whether a warning given once per search is due, `search` being
    `_running_search()`: always outside cross-validation; inside it, the first time for
    this search (or, in a worker process of a parallel search, for this process)."""
    if search is True:
        if warned_in_this_process:
            return False
        warned_in_this_process.append(True)
    elif search is not None:
        if search in warned_searches:
            return False
        warned_searches.add(search)
    return True


# the smallest party whose models the warnings take as learning something: the Dirichlet
# partition's default `min_party_size`
MIN_PARTY_ROWS = 10


def warn_about_assumptions(name, groups, X_unlabeled, public_set_labelled, data):
    """One `AssumptionWarning` for what `fit` assumed that it was not told: a single party
    (`groups` None), the training rows as the public set (`X_unlabeled` None, where
    `public_set_labelled`: the algorithm labels a public set); or for a federation
    that is hardly one (`data`'s parties: one party named, parties of fewer than
    `MIN_PARTY_ROWS` rows). Inside cross-validation, once per search, saying whether
    routing dropped `groups`."""
    assumed = []
    if groups is None:
        assumed.append("groups=None, so every row is one party's (centralized training). "
                       "Pass groups=, the party of each row")
    elif len(data.parties) == 1:
        assumed.append(f"groups names one party ({data.parties[0]!r}), so its rows are "
                       "all there is (centralized training). Pass groups= with the party "
                       "of each row, at least two parties")
    small = [] if groups is None else [
        (party, len(rows)) for party, rows in zip(data.parties, data.party_rows)
        if len(rows) < MIN_PARTY_ROWS]
    if small:
        named = ", ".join(f"{party!r} ({n} rows)" for party, n in small[:5])
        assumed.append(f"that {len(small)} parties of fewer than {MIN_PARTY_ROWS} rows "
                       f"({named}{', ...' if len(small) > 5 else ''}) train models worth "
                       "their vote: they learn little from so few rows, and each weighs "
                       "as much as a large party. Merge them, or leave them out")
    if X_unlabeled is None and public_set_labelled:
        assumed.append(
            "X_unlabeled=None, so the training rows, without their labels, are the public "
            "set the parties' models label, and nothing is private. Pass the public set "
            "as X_unlabeled"
        )
    if not assumed:
        return
    search = _running_search()
    if not _first_in_this_search(_warned_searches, _warned_in_this_process, search):
        return
    if search is not None and not get_config()["enable_metadata_routing"]:
        assumed.append(
            "with metadata routing off, GridSearchCV, cross_validate and their kin give "
            "groups to the splitter only: turn routing on, sklearn.set_config("
            "enable_metadata_routing=True), and skfedkt's estimators receive groups and "
            "X_unlabeled, which they request by default"
        )
    where = "" if search is None else " (once for this cross-validation)"
    warnings.warn(f"{name}.fit assumed{where}: " + "; ".join(assumed) + ".",
                  AssumptionWarning, stacklevel=_stacklevel_of_the_caller())


_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _stacklevel_of_the_caller():
    """The ``stacklevel`` that makes a warning point at the code that called the
    package (past its own frames and scikit-learn's fit wrapper), as a user reads it."""
    level = 2
    frame: Optional[FrameType] = sys._getframe(2)
    while frame is not None and (
        frame.f_code.co_filename.startswith(_PACKAGE)
        or frame.f_code.co_name == "wrapper" and frame.f_code.co_filename.endswith(
            os.path.join("sklearn", "base.py"))
    ):
        level, frame = level + 1, frame.f_back
    return level


def _check_groups(groups, n_rows):
    """Party labels, one per row, all of one kind: numbers or strings, none missing."""
    groups = np.asarray(groups)
    if groups.ndim != 1:
        raise ValueError(
            "groups must be 1-D, one party label per row; got an array of shape "
            f"{groups.shape}."
        )
    if len(groups) != n_rows:
        raise ValueError(
            f"groups has {len(groups)} entries but X has {n_rows} rows; give the party "
            "of every row."
        )
    missing = [
        i for i, label in enumerate(groups.tolist())
        if label is None or (isinstance(label, float) and np.isnan(label))
    ]
    if missing:
        raise ValueError(
            f"groups is missing the party of {len(missing)} row(s) (None or NaN), e.g. "
            f"row {missing[0]}; give every row a party label."
        )
    if groups.dtype == object:
        kinds = {type(label).__name__ for label in groups.tolist()}
        numbers = {"int", "float", "bool"}
        if len(kinds - numbers) > 1 or (kinds & numbers and kinds - numbers):
            raise TypeError(
                f"groups mixes party labels of types {sorted(kinds)}; use labels of one "
                "kind, all numbers or all strings (e.g. groups.astype(str))."
            )
    return groups


def _keep_frame(original, validated):
    # slicing the original DataFrame keeps column names for a ColumnTransformer
    return original if hasattr(original, "iloc") else validated


def _framed_like(columns, original, validated):
    """Rows with the given columns of the training DataFrame: validation has warned if
    their names differ or are missing, columns then match by position, and the base
    estimators, fitted on the DataFrame, should see its names (student rows stack it
    with the public rows)."""
    if hasattr(original, "iloc"):
        return original.set_axis(columns, axis=1)
    if sp.issparse(validated):
        return validated
    import pandas as pd

    return pd.DataFrame(validated, columns=columns)


def warn_if_classes_lost(classes, predicted, what, reference, reference_name, remedy):
    """Warn when `predicted` (class codes, indices into `classes`) holds one class
    while the class codes `reference` hold several of at least `_MIN_CLASS_SHARE` each,
    or gives such a class under half or over twice its share in `reference`."""
    n_classes = len(classes)
    reference_shares = np.bincount(reference, minlength=n_classes) / len(reference)
    predicted_shares = np.bincount(predicted, minlength=n_classes) / len(predicted)
    held = np.flatnonzero(reference_shares >= _MIN_CLASS_SHARE)
    names = classes.tolist()
    if np.unique(predicted).size == 1 and held.size > 1:
        warnings.warn(
            f"{what} a single class, {names[predicted[0]]!r}, although "
            f"{reference_name} hold {held.size} classes of at least "
            f"{_MIN_CLASS_SHARE:.0%} each: {remedy}",
            LabelCollapseWarning,
        )
        return
    # a class that crowds out the others is as telling as one that is lost
    distorted = np.union1d(_lost_classes(predicted_shares, reference_shares),
                           _lost_classes(reference_shares, predicted_shares))
    if distorted.size:
        details = ", ".join(
            f"class {names[c]!r}: {reference_shares[c]:.0%} of {reference_name}, "
            f"{predicted_shares[c]:.0%} of the predictions" for c in distorted
        )
        warnings.warn(
            f"{what} classes far from their shares in {reference_name} ({details}): "
            f"{remedy}",
            LabelCollapseWarning,
        )


def check_params(estimator):
    """How `validate_data` checks the rows of `estimator` (a meta-estimator): sparse
    rows and missing values as its tags allow; any dtype, so that mixed-type DataFrames
    go through to a base Pipeline untouched."""
    input_tags = get_tags(estimator).input_tags
    return dict(
        accept_sparse=["csr", "csc"] if input_tags.sparse else False,
        ensure_all_finite="allow-nan" if input_tags.allow_nan else True,
        # mixed-type DataFrames go through to a base Pipeline untouched
        dtype=None,
    )


def _validated(estimator, *arrays, **checks):
    """`validate_data` of `arrays` for `estimator`, whose refusal of missing values names
    the base estimators that refuse them: the meta-estimator takes them where those do."""
    try:
        return validate_data(estimator, *arrays, **checks)
    except ValueError as exc:
        name = type(estimator).__name__
        bases = [type(value).__name__ for key, value in estimator.get_params(deep=False).items()
                 if key.endswith("estimator") and hasattr(value, "fit")]
        if not bases or f"{name} does not accept missing values" not in str(exc):
            raise
        raise ValueError(str(exc).replace(
            f"{name} does not accept missing values",
            f"{name}'s base estimator ({', '.join(bases)}) does not accept missing "
            "values")) from exc


def validate_federated_data(estimator, X, y, groups, X_unlabeled):
    """The inputs of a federated fit, validated as `estimator`'s: sets its ``classes_``,
    ``parties_`` and ``n_features_in_`` (as `validate_data` sets the last), and returns
    the rows, class codes, parties and public set (`FederatedData`)."""
    checks = check_params(estimator)
    X_valid, y = _validated(estimator, X, y, **checks)
    check_classification_targets(y)
    estimator.classes_, y_codes = np.unique(y, return_inverse=True)

    if groups is None:
        groups = np.zeros(len(y_codes), dtype=np.int64)
    else:
        groups = _check_groups(groups, len(y_codes))
    estimator.parties_, party_codes = np.unique(groups, return_inverse=True)
    # one stable sort: each party's rows in ascending order
    party_rows = np.split(np.argsort(party_codes, kind="stable"),
                          np.cumsum(np.bincount(party_codes))[:-1])

    X = _keep_frame(X, X_valid)
    shifted = False
    if X_unlabeled is None:
        X_public = X
    else:
        if isinstance(X_unlabeled, tuple):
            if len(X_unlabeled) != 1:
                raise ValueError(
                    "X_unlabeled given as a tuple must hold exactly one element, the "
                    f"public set (see PublicSet); got {len(X_unlabeled)} elements."
                )
            X_unlabeled = X_unlabeled[0]
        try:
            public_valid = _validated(estimator, X_unlabeled, reset=False, **checks)
        except (ValueError, TypeError) as exc:
            # e.g. a sparse public set for a dense-only base estimator (a TypeError);
            # scikit-learn's message calls the array it checked X
            message = re.sub(r"^X has (\d+) features?, but (\w+) is expecting",
                             r"X_unlabeled has \1 features, but \2 is expecting",
                             str(exc))
            raise type(exc)(f"Invalid X_unlabeled: {message}") from exc
        shifted = _warn_if_public_shifted(X_valid, public_valid)
        X_public = (_framed_like(X.columns, X_unlabeled, public_valid)
                    if hasattr(X, "iloc") else _keep_frame(X_unlabeled, public_valid))
    return FederatedData(X=X, y=y_codes, classes=estimator.classes_,
                         parties=estimator.parties_.tolist(),
                         party_rows=party_rows, X_public=X_public,
                         public_set_shifted=shifted)
