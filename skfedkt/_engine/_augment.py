"""Synthetic public rows: jittered copies that let a small public set carry more knowledge.

A model distilled through a few hundred public rows learns its teachers only where those
rows lie. Copies of the public rows with a little noise (the "jitter" of model
compression, Bucilă et al. 2006) add queries near the same data. They are made from the
public rows and a seed every party and the server agree on, so they reveal nothing about
any party and every side makes the same ones.
"""

import numpy as np
import scipy.sparse as sp
from sklearn.utils import check_random_state

from ._compat import num_samples

# standard deviation of the jitter, in each column's standard deviation on the public set
# (measured on the label-skew benchmark: 0.3 and 0.5 within noise of each other)
JITTER_SCALE = 0.3


def _jittered_column(values, reference, rng):
    """`values` (copies of `reference`'s rows) plus Gaussian noise of `JITTER_SCALE`
    times the column's standard deviation; a column of integers stays integers within
    its range, NaN stays NaN."""
    finite = reference[np.isfinite(reference)]
    if finite.size == 0 or np.ptp(finite) == 0:
        return values
    jittered = values + rng.normal(scale=JITTER_SCALE * finite.std(), size=len(values))
    if np.array_equal(finite, np.round(finite)):
        jittered = np.clip(np.round(jittered), finite.min(), finite.max())
    return jittered


def jittered_rows(X, n_rows, random_state):
    """The rows that bring the public set `X` up to `n_rows` rows: copies of its rows in
    turn, every numeric column jittered.

    Non-numeric columns of a DataFrame are copied as they are. A sparse matrix, or a
    set of at least `n_rows` rows, gets no rows (None).

    Parameters
    ----------
    X : {ndarray, DataFrame, sparse matrix} of shape (n_public, n_features)
    n_rows : int
    random_state : int or RandomState

    Returns
    -------
    rows : ndarray or DataFrame of shape (n_rows - n_public, n_features), or None

    Examples
    --------
    >>> import numpy as np
    >>> from skfedkt._engine._augment import jittered_rows
    >>> X = np.array([[0.0, 1], [1.0, 3], [2.0, 5]])
    >>> rows = jittered_rows(X, 7, random_state=0)
    >>> rows.shape, bool(np.isin(rows[:, 1], [1, 2, 3, 4, 5]).all())  # integers stay integers
    ((4, 2), True)
    """
    n_public = num_samples(X)
    if n_rows <= n_public or sp.issparse(X):
        return None
    rng = check_random_state(random_state)
    source = np.resize(np.arange(n_public), n_rows - n_public)
    if hasattr(X, "iloc"):
        from pandas.api.types import is_numeric_dtype

        copies = X.iloc[source].reset_index(drop=True)
        for column in copies.columns:
            if is_numeric_dtype(copies[column].dtype):
                values = _jittered_column(copies[column].to_numpy(dtype=float),
                                          X[column].to_numpy(dtype=float), rng)
                copies[column] = values.astype(copies[column].dtype)
        return copies
    X = np.asarray(X)
    copies = X[source]
    if not np.issubdtype(X.dtype, np.number):
        return copies
    return np.column_stack([
        _jittered_column(copies[:, j].astype(float), X[:, j].astype(float), rng)
        for j in range(X.shape[1])
    ]).astype(X.dtype, copy=False)
