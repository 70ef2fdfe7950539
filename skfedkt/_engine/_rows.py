"""Rows of the training data as the engine hands them to clones: blocks stacked one
after the other, and the rows a clone learns from, taken without copying the rest."""

import numpy as np
import scipy.sparse as sp

from ._compat import num_samples, safe_indexing


def stack_rows(*blocks):
    """The rows of every block, one block after the other, in one matrix or DataFrame."""
    if all(hasattr(block, "iloc") for block in blocks):
        import pandas as pd

        return pd.concat(blocks, ignore_index=True)
    if any(sp.issparse(block) for block in blocks):
        return sp.vstack(blocks, format="csr")
    return np.vstack([np.asarray(block) for block in blocks])


class StackedRows:
    """The rows of several matrices, one after the other, as one matrix to index, never
    copied whole: a clone's task copies only the rows it learns from.

    Parameters
    ----------
    *blocks : array-like, sparse matrix or DataFrame
        The matrices, with the same columns.
    """

    def __init__(self, *blocks):
        self.blocks = blocks
        self.starts = np.cumsum([0] + [num_samples(block) for block in blocks])

    def take(self, rows):
        """The rows `rows` (indices into the stack), in their order, as one matrix."""
        block_of = np.searchsorted(self.starts, rows, side="right") - 1
        order = np.argsort(block_of, kind="stable")
        parts = [
            safe_indexing(block, rows[order][block_of[order] == b] - start)
            for b, (block, start) in enumerate(zip(self.blocks, self.starts))
        ]
        stacked = stack_rows(*parts)
        if np.any(np.diff(block_of) < 0):  # rows interleave blocks: restore their order
            stacked = safe_indexing(stacked, np.argsort(order, kind="stable"))
        return stacked


def take_rows(X, rows):
    """Rows `rows` of `X` (every row if None): a matrix, DataFrame or `StackedRows`."""
    if isinstance(X, StackedRows):
        return X.take(np.arange(X.starts[-1]) if rows is None else np.asarray(rows))
    return X if rows is None else safe_indexing(X, rows)
