"""The shared engine's clone fitting: seeds, batches and the rows it copies."""

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from numpy.testing import assert_array_equal
from sklearn.datasets import load_breast_cancer
from sklearn.ensemble import RandomForestClassifier
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.tree import DecisionTreeClassifier

from skfedkt._engine._fitting import Task, TierJob, fit_clones
from skfedkt._engine._rows import StackedRows, take_rows
from skfedkt._engine._seeds import seeded_clone


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
    one = fit_clones(tasks, TierJob(X, 2, X_predict=X, soft_votes=True), seeds)
    two = fit_clones(tasks, TierJob(X, 2, X_predict=X, soft_votes=True), seeds, n_jobs=2)
    assert_array_equal(one.predictions, two.predictions)
    # the nested random_state is drawn from the seed; n_jobs is 1 where clones run
    # in parallel
    clone = seeded_clone(forest, 7, single_threaded=True)
    assert clone.get_params()["randomforestclassifier__n_jobs"] == 1
    assert clone.get_params()["randomforestclassifier__random_state"] == (
        seeded_clone(forest, 7).get_params()["randomforestclassifier__random_state"])


class _ThreadProbe(DecisionTreeClassifier):
    """A tree that notes the most threads any BLAS or OpenMP pool may use as it fits
    (XGBoost's and HistGradientBoosting's OpenMP among them)."""

    seen = []

    def fit(self, X, y, sample_weight=None):
        from threadpoolctl import threadpool_info

        type(self).seen.append(max(pool["num_threads"] for pool in threadpool_info()))
        return super().fit(X, y, sample_weight=sample_weight)


@pytest.mark.parametrize("n_jobs", [None, 1])
def test_every_fit_of_a_round_runs_one_thread_whatever_the_callers(n_jobs):
    """A busy machine: default OpenMP threads in every clone fit (teachers, students,
    the final model) fought two other processes for two cores, 44-201 s against 1.6 s
    with one thread for FedKT with XGBoost. The suite sets one thread by environment,
    so the caller's pools are widened here first."""
    from threadpoolctl import threadpool_limits

    from skfedkt import FedKTClassifier

    X, y = load_breast_cancer(return_X_y=True)
    _ThreadProbe.seen = []
    with threadpool_limits(limits=2):
        FedKTClassifier(_ThreadProbe(max_depth=3), n_jobs=n_jobs, random_state=0).fit(
            X[100:], y[100:], groups=np.arange(len(y) - 100) % 3, X_unlabeled=X[:100])
    assert len(_ThreadProbe.seen) > 10 and set(_ThreadProbe.seen) == {1}


def _configuration(_):
    from skfedkt import get_config

    return get_config()["stack_networks"]


@pytest.mark.parametrize("n_jobs", [1, 2])
def test_the_configuration_reaches_the_engine_s_workers(n_jobs):
    from skfedkt import config_context
    from skfedkt._engine._transport import map_in_parallel

    # enough jobs that joblib draws the later ones from its own threads (36 of 40 ran
    # under the default configuration where each job read the configuration there)
    with config_context(stack_networks=False):
        assert map_in_parallel(_configuration, range(40), n_jobs=n_jobs) == [False] * 40
    assert map_in_parallel(_configuration, range(2), n_jobs=n_jobs) == [True] * 2


def test_the_configuration_refuses_what_is_not_a_switch():
    from skfedkt import set_config

    with pytest.raises(TypeError, match="stack_networks must be True or False, got 0"):
        set_config(stack_networks=0)


def test_the_environment_sets_the_configuration_s_default():
    import os
    import subprocess
    import sys

    environment = dict(os.environ, SKFEDKT_STACK_NETWORKS="0")
    printed = subprocess.run(
        [sys.executable, "-c", "import skfedkt; print(skfedkt.get_config())"],
        env=environment, capture_output=True, text=True, check=True).stdout
    assert printed.strip() == "{'stack_networks': False, 'secure_aggregation': False}"
