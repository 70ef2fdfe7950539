"""The shared engine's clone fitting: seeds, batches and the rows it copies."""

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from numpy.testing import assert_array_equal
from sklearn.ensemble import RandomForestClassifier
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.tree import DecisionTreeClassifier

from skfedkt._engine._fitting import StackedRows, Task, fit_clones, seeded_clone, take_rows


@pytest.mark.parametrize("kind", ["array", "frame", "sparse"])
def test_stacked_rows_take_the_rows_of_the_stacked_matrix_in_order(kind):
    top, bottom = np.arange(12.0).reshape(4, 3), 100 + np.arange(9.0).reshape(3, 3)
    as_kind = {"array": np.asarray, "sparse": sp.csr_matrix,
               "frame": lambda a: pd.DataFrame(a, columns=["a", "b", "c"])}[kind]
    stacked = StackedRows(as_kind(top), as_kind(bottom))
    whole = np.vstack([top, bottom])
    for rows in ([0, 2, 4, 6], [5, 1, 6, 0, 0], [4, 5], None):
        taken = take_rows(stacked, rows)
        dense = taken.toarray() if sp.issparse(taken) else np.asarray(taken)
        assert_array_equal(dense, whole if rows is None else whole[rows])


def test_seeded_clones_match_for_any_batching_and_nested_parameters():
    X = np.random.RandomState(0).normal(size=(300, 4))
    y = (X[:, 0] > 0).astype(int)
    forest = make_pipeline(StandardScaler(), RandomForestClassifier(n_estimators=5, n_jobs=4))
    tasks = [Task(estimator, y[rows], rows) for estimator in (DecisionTreeClassifier(), forest)
             for rows in np.array_split(np.arange(300), 10)]
    seeds = np.arange(len(tasks))
    one = fit_clones(tasks, X, n_classes=2, seeds=seeds, X_predict=X, soft_votes=True)
    two = fit_clones(tasks, X, n_classes=2, seeds=seeds, X_predict=X, soft_votes=True,
                     n_jobs=2)
    assert_array_equal(one.predictions, two.predictions)
    # the nested random_state is drawn from the seed; n_jobs is 1 where clones run
    # in parallel
    clone = seeded_clone(forest, 7, single_threaded=True)
    assert clone.get_params()["randomforestclassifier__n_jobs"] == 1
    assert clone.get_params()["randomforestclassifier__random_state"] == (
        seeded_clone(forest, 7).get_params()["randomforestclassifier__random_state"])
