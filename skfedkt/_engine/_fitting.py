"""Fitting many clones of base estimators in parallel, each on labels it can digest."""

import contextvars
import copy
import functools
import io
import os
import pickle
import re
import sys
import threading
import time
import types
import warnings
from contextlib import contextmanager, nullcontext
from itertools import islice
from typing import NamedTuple

import numpy as np
from joblib import effective_n_jobs

try:  # the cloudpickle loky sends calls with: joblib's own copy before joblib 1.5
    from joblib.externals import cloudpickle
except ImportError:
    import cloudpickle
from sklearn import config_context
from sklearn.base import BaseEstimator, ClassifierMixin, clone
from sklearn.dummy import DummyClassifier
from sklearn.pipeline import Pipeline
from sklearn.utils import _safe_indexing
from sklearn.utils.metaestimators import available_if
from sklearn.utils.parallel import Parallel, delayed
from sklearn.utils.validation import _num_samples, has_fit_parameter
from threadpoolctl import ThreadpoolController

from .. import _config
from ._seeds import _MAX_SEED, scratch_random_state, seed_torch
from ._validation import stack_rows
from ._voting import count_votes


def code_dtype(n_classes):
    """The smallest signed integer type holding the class codes and the abstention -1."""
    return np.int8 if n_classes < 128 else np.int16 if n_classes < 32768 else np.int32


def _final_step(estimator):
    return estimator[-1] if isinstance(estimator, Pipeline) else estimator


def _predicts_output_positions(estimator):
    """Whether `estimator` predicts the argmax position of a fixed output layer.

    skorch nets have one output unit per class (K in all) and ``predict`` returns the
    position of the largest output, not a label seen in ``fit``: they are trained on the
    global codes ``0..K-1`` even when their rows miss some classes.
    """
    skorch = sys.modules.get("skorch")
    return skorch is not None and isinstance(_final_step(estimator), skorch.NeuralNet)


def sample_weight_param(estimator):
    """The ``fit`` parameter that carries sample weights to `estimator`, or None.

    A Pipeline passes them to its final step (``"name__sample_weight"``).
    """
    if isinstance(estimator, Pipeline):
        name, last = estimator.steps[-1]
        inner = sample_weight_param(last)
        return None if inner is None else f"{name}__{inner}"
    return "sample_weight" if has_fit_parameter(estimator, "sample_weight") else None


def soft_label_rows(distributions):
    """Rows, labels and weights that teach a classifier per-example class distributions.

    Every example appears once per class of positive probability, labelled with that
    class and weighted by its probability: the weighted log loss of these rows is the
    cross-entropy to the distributions, and their total weight is the number of
    examples, as with hard labels. Examples without probability mass are left out.

    Parameters
    ----------
    distributions : ndarray of shape (n_samples, n_classes)
        Non-negative; each row sums to one or to zero.

    Returns
    -------
    rows, labels : ndarray of int of shape (n_pairs,)
    weights : ndarray of float of shape (n_pairs,)

    Examples
    --------
    >>> import numpy as np
    >>> from skfedkt._engine._fitting import soft_label_rows
    >>> soft_label_rows(np.array([[0.25, 0.75], [0.0, 0.0], [1.0, 0.0]]))
    (array([0, 0, 2]), array([0, 1, 0]), array([0.25, 0.75, 1.  ]))
    """
    rows, labels = np.nonzero(distributions > 0)
    return rows, labels, distributions[rows, labels]


class Task(NamedTuple):
    """One clone to fit: an estimator, the rows it learns from and their labels."""

    estimator: object
    """The estimator to clone."""
    y: np.ndarray
    """Global class codes of the rows, aligned with `rows` (with every row of X if None)."""
    rows: np.ndarray = None
    """Indices of the rows of X (repeats allowed); None for every row."""
    sample_weight: np.ndarray = None
    """Weights aligned with `y`; None for unweighted rows."""
    score: object = None
    """``score(model, X)``, run on the fitted clone where it was fit (say, its score on
    rows it held out), whose value comes back in `CloneFits.scores`; None for none."""
    name: str = None
    """What the clone is, in messages ("party 'a', partition 1, teacher 2")."""


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
        self.starts = np.cumsum([0] + [_num_samples(block) for block in blocks])

    def take(self, rows):
        """The rows `rows` (indices into the stack), in their order, as one matrix."""
        block_of = np.searchsorted(self.starts, rows, side="right") - 1
        order = np.argsort(block_of, kind="stable")
        parts = [
            _safe_indexing(block, rows[order][block_of[order] == b] - start)
            for b, (block, start) in enumerate(zip(self.blocks, self.starts))
        ]
        stacked = stack_rows(*parts)
        if np.any(np.diff(block_of) < 0):  # rows interleave blocks: restore their order
            stacked = _safe_indexing(stacked, np.argsort(order, kind="stable"))
        return stacked


def take_rows(X, rows):
    """Rows `rows` of `X` (every row if None): a matrix, DataFrame or `StackedRows`."""
    if isinstance(X, StackedRows):
        return X.take(np.arange(X.starts[-1]) if rows is None else np.asarray(rows))
    return X if rows is None else _safe_indexing(X, rows)


class ClassCodeModel:
    """A fitted clone and the global class codes its outputs stand for.

    Clones are fit on int64 labels they can digest: the contiguous codes ``0..k-1`` of
    the ``k`` classes present in their rows (XGBoost refuses gaps such as ``[0, 2]``), or
    the global codes for skorch nets (see `_predicts_output_positions`). Rows of a single
    class give a constant `DummyClassifier` instead of an error. ``codes[j]`` is the
    global class code of the clone's label ``j``.

    Sample weights reach the estimator through `sample_weight_param`; an estimator
    that takes none is fit without them (callers check `sample_weight_param` first
    when the weights matter).
    """

    def __init__(self, estimator, codes):
        self.estimator = estimator
        self.codes = codes

    @classmethod
    def fit(cls, estimator, X, y, n_classes, sample_weight=None):
        present = np.unique(y)
        if present.size == 1:
            estimator, codes = DummyClassifier(strategy="most_frequent"), present
            sample_weight = None
        elif _predicts_output_positions(estimator):
            codes = np.arange(n_classes)
        else:
            codes = present
        weight_param = None if sample_weight is None else sample_weight_param(estimator)
        fit_params = {} if weight_param is None else {weight_param: sample_weight}
        # with routing on, a Pipeline takes no "step__param"; the clone needs no routing
        with config_context(enable_metadata_routing=False):
            targets = np.searchsorted(codes, y)
            if _is_torch_net(estimator):
                from ._stacking import explained_module_error, targets_for

                try:
                    estimator.fit(X, targets_for(estimator, targets), **fit_params)
                except RuntimeError as exc:
                    explained = explained_module_error(_final_step(estimator), exc)
                    if explained is exc:
                        raise
                    raise explained from exc
            else:
                estimator.fit(X, targets.astype(np.int64), **fit_params)
        return cls(estimator, codes)

    @property
    def is_constant(self):
        return self.codes.size == 1

    def predict(self, X):
        """Global class codes."""
        return self.codes[np.asarray(self.estimator.predict(X), dtype=np.intp)]

    def votes(self, X, n_classes, soft):
        """One vote per row, shape (n_samples, n_classes), each row summing to one.

        With `soft`, the class probabilities (where the estimator has
        ``predict_proba``); otherwise, or without it, the one-hot prediction.
        """
        if soft and hasattr(self.estimator, "predict_proba"):
            return self.predict_proba(X, n_classes)
        one_hot = np.zeros((_num_samples(X), n_classes))
        one_hot[np.arange(len(one_hot)), self.predict(X)] = 1
        return one_hot

    def predict_proba(self, X, n_classes):
        """Probabilities with one column per global class, zero for unseen classes."""
        proba = self.estimator.predict_proba(X)
        aligned = np.zeros((proba.shape[0], n_classes))
        aligned[:, self.codes] = proba
        return aligned

    def decision_function(self, X, n_classes):
        """Scores in scikit-learn's layout for `n_classes` classes.

        Classes the clone never saw score ``-inf``; a constant clone scores 0 for its
        class. For two classes the result is 1-D (positive favours ``classes_[1]``).
        """
        if self.is_constant:
            scores = np.zeros((_num_samples(X), 1))
        else:
            scores = np.asarray(self.estimator.decision_function(X), dtype=float)
            if scores.ndim == 1:
                if n_classes == 2:
                    return scores
                scores = np.column_stack([-scores, scores])
        aligned = np.full((scores.shape[0], n_classes), -np.inf)
        aligned[:, self.codes] = scores
        if n_classes == 2:
            return aligned[:, 1] - aligned[:, 0]
        return aligned


class GlobalLabelClassifier(ClassifierMixin, BaseEstimator):
    """A fitted `ClassCodeModel` seen as a scikit-learn classifier of the global labels.

    Lets scikit-learn scorers evaluate a clone that was trained on class codes.

    Parameters
    ----------
    model : ClassCodeModel
        The fitted clone.
    classes : ndarray of shape (n_classes,)
        The global labels, ``classes_`` of the meta-estimator.
    """

    def __init__(self, model, classes):
        self.model = model
        self.classes = classes

    @property
    def classes_(self):
        return self.classes

    def __sklearn_is_fitted__(self):
        return True

    def predict(self, X):
        return self.classes[self.model.predict(X)]

    @available_if(lambda self: hasattr(self.model.estimator, "predict_proba"))
    def predict_proba(self, X):
        return self.model.predict_proba(X, len(self.classes))

    @available_if(
        lambda self: self.model.is_constant or hasattr(self.model.estimator, "decision_function")
    )
    def decision_function(self, X):
        return self.model.decision_function(X, len(self.classes))


class SeededTemplate:
    """Unfitted clones of `estimator` whose randomness is fixed by a seed each.

    Every ``random_state`` parameter (nested ones too) gets its own integer drawn from
    the seed, and torch's RNG is seeded for skorch nets, which have no random_state.
    With `single_threaded`, parameters that ask for parallel workers (``n_jobs`` other
    than None or 1) are set to 1. The estimator is cloned and its parameters are looked
    up once; each seeded clone is a copy of that clone, which costs a few microseconds
    rather than a clone's and a parameter search's milliseconds.
    """

    def __init__(self, estimator, single_threaded=False):
        self.template = clone(estimator)
        params = self.template.get_params(deep=True)
        self.random_state_keys = _matching_keys(params, "random_state")
        # the clones already run in parallel: their own workers would oversubscribe
        self.fixed = {key: 1 for key in _matching_keys(params, "n_jobs")
                      if single_threaded and params[key] not in (None, 1)}
        # a plain estimator's set_params only sets its attributes: set them directly
        self.direct = (type(self.template).set_params is BaseEstimator.set_params
                       and all("__" not in key for key in (*self.random_state_keys,
                                                           *self.fixed)))

    def clone(self, seed):
        """An unfitted clone seeded with `seed`."""
        estimator = copy.deepcopy(self.template)
        rng = scratch_random_state(seed)
        params = {key: rng.randint(_MAX_SEED) for key in self.random_state_keys}
        params.update(self.fixed)
        if self.direct:
            for key, value in params.items():
                setattr(estimator, key, value)
        else:
            estimator.set_params(**params)
        torch = sys.modules.get("torch")
        if torch is not None:
            seed_torch(torch, int(seed))
        return estimator


def _matching_keys(params, name):
    """The keys of `params` that are `name` or a nested ``*__name``, sorted."""
    return sorted(key for key in params if key == name or key.endswith("__" + name))


def seeded_clone(estimator, seed, single_threaded=False):
    """An unfitted clone of `estimator` seeded with `seed` (see `SeededTemplate`)."""
    return SeededTemplate(estimator, single_threaded).clone(seed)


def clone_votes(model, X, n_classes, soft_votes):
    """A fitted clone's votes on `X`: class probabilities (float32, shape (n_samples,
    n_classes)) with `soft_votes`, else class codes (the smallest integer type)."""
    if soft_votes:
        # float32: one row of probabilities per public example and clone adds up
        return model.votes(X, n_classes, soft=True).astype(np.float32)
    return model.predict(X).astype(code_dtype(n_classes))


def map_in_parallel(function, items, n_jobs=None):
    """``function(item)`` of every item, in order, in one flat parallel batch; warnings
    raised in worker processes are issued in this one (`issue_worker_warnings`)."""
    main, run = os.getpid(), carried(_recorded)
    results = []
    for result, caught in Parallel(n_jobs=n_jobs)(
        delayed(run)(main, function, item) for item in items
    ):
        issue_worker_warnings(caught)
        results.append(received(result))
    return results


def predict_votes(models, X, *, n_classes, soft_votes, n_jobs=None):
    """`clone_votes` of every fitted clone, in one flat parallel batch, stacked."""
    votes_of = functools.partial(clone_votes, X=X, n_classes=n_classes,
                                 soft_votes=soft_votes)
    return np.stack(map_in_parallel(votes_of, models, n_jobs))


# the kinds of warning already issued from worker processes in the current call of a
# meta-estimator's method (see `warnings_once_per_call`)
_issued = contextvars.ContextVar("skfedkt_worker_warnings", default=None)


def warnings_once_per_call(method):
    """Within `method`, each kind of warning that worker processes raise (category and
    message, numbers aside) is issued once in the calling process."""
    @functools.wraps(method)
    def once(*args, **kwargs):
        token = _issued.set(set())
        try:
            return method(*args, **kwargs)
        finally:
            _issued.reset(token)

    return once


def _kind(category, message):
    return category, re.sub(r"\d+(\.\d+)?", "#", message)


@contextmanager
def _caught_in_worker(main_pid):
    """In a worker process, record the warnings rather than print them there, where
    the user's filters do not reach; in the calling process and its threads (whose
    filters are the caller's) let them through. Yields the list it fills with one
    ``(category, message)`` per kind."""
    caught = []
    if os.getpid() == main_pid or threading.current_thread() is not threading.main_thread():
        yield caught
        return
    with warnings.catch_warnings(record=True) as records:
        warnings.simplefilter("always")
        yield caught
    kinds = {}
    for record in records:
        kinds.setdefault(_kind(record.category, str(record.message)),
                         (record.category, str(record.message)))
    caught.extend(kinds.values())


class _ByValue:
    """A worker's result, pickled (cloudpickle) so that what the caller defined in its
    own script or notebook (``__main__``: a module class, a function in a
    FunctionTransformer), which the worker received by value, goes back by name: the
    caller's `received` finds the caller's very objects, and the fitted clone pickles
    as the caller's own would. What went by name goes by value too, for a caller whose
    ``__main__`` is not where they were defined (a script run by a tool)."""

    def __init__(self, result):
        _name_main_classes()
        buffer = io.BytesIO()
        _MainByName(buffer, protocol=pickle.HIGHEST_PROTOCOL).dump(result)
        self.data = buffer.getvalue()
        main = sys.modules["__main__"]
        # by value: cloudpickle brings a class back as the caller's own
        self.named = cloudpickle.dumps({name: getattr(main, name) for name in _named_in_main})


class _MainByName(cloudpickle.CloudPickler):
    """cloudpickle, but a class or function of the caller's ``__main__`` goes by name
    (`_name_in_main`)."""

    def reducer_override(self, obj):
        if isinstance(obj, (type, types.FunctionType)) and _name_in_main(obj):
            return NotImplemented  # pickle's own reduction: by name
        return super().reducer_override(obj)


# the names this worker gave in its __main__ to objects of the caller's __main__
_named_in_main = set()


def _name_in_main(obj):
    """Give `obj`, a class or function of the caller's ``__main__`` received by value,
    its name in this worker's ``__main__`` (a function arrives anew with every call:
    the newest takes the name), unless the worker's own ``__main__`` uses the name;
    whether it has it."""
    name = getattr(obj, "__qualname__", ".")
    if getattr(obj, "__module__", None) != "__main__" or not name.isidentifier():
        return False  # a lambda, or a class or function defined inside another
    main = sys.modules["__main__"]
    if name in _named_in_main or not hasattr(main, name):
        setattr(main, name, obj)
        _named_in_main.add(name)
    return getattr(main, name) is obj


def _name_main_classes():
    """In a worker, name the classes received by value from the caller's ``__main__``
    (`_name_in_main`) before anything is pickled: skorch pickles a net's module with
    pickle itself, by reference, which then finds them here and, in the caller, the
    caller's own class."""
    tracked = getattr(getattr(cloudpickle, "cloudpickle", cloudpickle),
                      "_DYNAMIC_CLASS_TRACKER_BY_CLASS", {})
    for cls in list(tracked):
        _name_in_main(cls)


def received(result):
    """A result as the worker computed it (see `_ByValue`)."""
    if not isinstance(result, _ByValue):
        return result
    main = sys.modules["__main__"]
    missing = {name: value for name, value in pickle.loads(result.named).items()
               if not hasattr(main, name)}
    for name, value in missing.items():
        setattr(main, name, value)
    try:
        return pickle.loads(result.data)
    finally:
        for name in missing:
            delattr(main, name)


def carried(function):
    """`function`, to run in a worker process or thread under the calling thread's
    configuration (`skfedkt.get_config`), as scikit-learn carries its own. Call it
    before a generator of jobs, not inside: joblib draws the later jobs of a batch from
    its own threads, whose configuration is the default."""
    return functools.partial(_in_config, _config.get_config(), function)


def _in_config(config, function, *args, **kwargs):
    with _config.config_context(**config):
        return function(*args, **kwargs)


def _recorded(main_pid, function, *args, **kwargs):
    """``function(*args, **kwargs)`` and the warnings it raised in a worker process;
    from a worker process, the result by value (`_ByValue`), to pass to `received`."""
    with _caught_in_worker(main_pid) as caught:
        result = function(*args, **kwargs)
    return (result if os.getpid() == main_pid else _ByValue(result)), caught


def issue_worker_warnings(caught):
    """Issue here, under the caller's filters, warnings that worker processes recorded:
    within `warnings_once_per_call`, each kind once per call."""
    issued = _issued.get()
    for category, message in caught:
        if issued is not None:
            if _kind(category, message) in issued:
                continue
            issued.add(_kind(category, message))
        warnings.warn(message, category, stacklevel=2)


def _fit_clone(task, template, seed, X, n_classes, X_predict, soft_votes, keep_model,
               score_training):
    X_all = X
    X = take_rows(X, task.rows)
    model = ClassCodeModel.fit(template.clone(seed), X, task.y, n_classes,
                               task.sample_weight)
    predictions = None if X_predict is None else clone_votes(
        model, X_predict, n_classes, soft_votes
    )
    training_accuracy = np.mean(model.predict(X) == task.y) if score_training else None
    score = None if task.score is None else task.score(model, X_all)
    return (model if keep_model else None), predictions, training_accuracy, score


# threadpoolctl's view of the loaded thread pools, and how many modules were loaded
# when it looked: finding the pools takes milliseconds, a fit makes many limits
_pools = [None, 0]


def _thread_pools():
    """A `ThreadpoolController` of the pools loaded now, found again only after an
    import (which may load a library with a pool of its own)."""
    if _pools[0] is None or len(sys.modules) != _pools[1]:
        _pools[:] = [ThreadpoolController(), len(sys.modules)]
    return _pools[0]


@contextmanager
def one_thread():
    """Within, every BLAS and OpenMP pool and torch's own run one thread.

    Clone fits run in it, in this process or in a worker: a clone is small, and
    threads that spin while they wait fight every other process for the cores. On a
    2-core machine busy with two other processes, two torch threads trained a stack
    of 20 nets 14 times slower than one (1.9 s against 26.7 s) and fitted skorch
    teachers twice as slowly; idle, they gained at most a fifth. More cores serve a
    fit through ``n_jobs``, one process (and one thread) per job.

    The limits are the process's: only its main thread sets them (a worker process
    runs its jobs there); under joblib's threading backend the caller sets them once
    around the whole batch (`_iter_per_clone`).
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    torch = sys.modules.get("torch")
    threads = None if torch is None else torch.get_num_threads()
    with _thread_pools().limit(limits=1):
        if threads not in (None, 1):
            torch.set_num_threads(1)
        try:
            yield
        finally:
            if threads not in (None, 1):
                torch.set_num_threads(threads)


def in_one_thread(function, *args, **kwargs):
    """``function(*args, **kwargs)`` within `one_thread`."""
    with one_thread():
        return function(*args, **kwargs)


def _fit_batch(batch, **shared):
    """`_fit_clone` of every ``(task, template, seed)`` of `batch`, in order, each
    on one thread (`one_thread`): one parallel job for several small fits, which
    pays one dispatch for all of them."""
    with one_thread():
        return [_fit_clone(task, template, seed, **shared) for task, template, seed in batch]


# bytes of votes one batch may hold before they are summed (see `_batch_size`)
_BATCH_VOTE_BYTES = 16 * 2**20


def _batch_size(n_tasks, n_workers, n_predict, n_classes, soft_votes):
    """Tasks per parallel job: four jobs per worker, so that uneven fits still balance,
    and no more votes per job than `_BATCH_VOTE_BYTES`."""
    vote_bytes = n_predict * (4 * n_classes if soft_votes else 1)
    by_memory = _BATCH_VOTE_BYTES // max(vote_bytes, 1)
    return int(max(1, min(-(-n_tasks // (4 * n_workers)), by_memory)))


class CloneFits(NamedTuple):
    """What `fit_clones` returns, one entry per task."""

    models: list
    """Fitted `ClassCodeModel` per task (``None`` when not kept)."""
    predictions: np.ndarray
    """Predictions on ``X_predict``: class codes of shape (n_tasks, n_predict), or class
    probabilities of shape (n_tasks, n_predict, n_classes) with `soft_votes`; or None."""
    training_accuracy: np.ndarray
    """Accuracy of each clone on its own training rows, or None."""
    scores: list
    """What each task's `Task.score` gave (None for a task without one)."""


# what the current call of a meta-estimator's method records of each tier it fits
# (see `recording_tiers`)
_tiers = contextvars.ContextVar("skfedkt_tiers", default=None)


@contextmanager
def recording_tiers():
    """Within, every tier of clones fitted is recorded in the list this yields: one
    dict per tier (``tier``, ``clones``, ``path``, ``reason``, ``chunks``, ``device``,
    ``seconds``), where a meta-estimator reads its ``tier_fits_``."""
    record = []
    token = _tiers.set(record)
    try:
        yield record
    finally:
        _tiers.reset(token)


def _is_torch_net(estimator):
    return _predicts_output_positions(estimator)


def check_tier(tasks, tier):
    """Refuse, before any of its fits, a tier whose skorch nets cannot split some
    clone's rows for their own validation (`_skorch_checks`)."""
    for estimator in {id(task.estimator): task.estimator for task in tasks}.values():
        if _is_torch_net(estimator):
            from ._skorch_checks import check_validation_splits
            from ._stacking import targets_for

            check_validation_splits(
                _final_step(estimator),
                [task for task in tasks if task.estimator is estimator], tier,
                lambda task, estimator=estimator: targets_for(estimator, task.y))


def stacking_probe(tasks, X, seeds, n_classes, templates=None):
    """How the tier's clones stack (`_stacking.Probe`), or why they fit one by one (a
    string): the stacked path serves tasks that all clone one skorch net it can
    train together faithfully, where the configuration lets it (`skfedkt.set_config`).
    `templates`: the tasks' `SeededTemplate` by estimator id (made here if None)."""
    estimators = {id(task.estimator) for task in tasks}
    template = (templates[next(iter(estimators))] if templates is not None
                else SeededTemplate(tasks[0].estimator))
    if not _config.get_config()["stack_networks"]:
        return "skfedkt's configuration: stack_networks=False"
    if len(estimators) > 1:
        return "the tier clones several estimators"
    if not _is_torch_net(template.template):
        return f"{type(_final_step(template.template)).__name__} is not a torch network"
    from . import _stacking

    reason = _stacking.stacking_refusal(template.template)
    if reason is not None:
        return reason
    if sample_weight_param(template.template) is not None and any(
            task.sample_weight is not None for task in tasks):
        return "sample weights: the stacked path trains on unweighted rows"
    several = [i for i, task in enumerate(tasks) if np.unique(task.y).size > 1]
    if not several:
        return "every clone's rows hold one class"
    first = several[0]
    max_rows = max(len(task.y) for task in tasks)
    probe = in_one_thread(_stacking.probe, template, seeds[first],
                          take_rows(X, tasks[first].rows),
                          np.asarray(tasks[first].y, dtype=np.int64), n_classes, max_rows)
    return probe if probe.refusal is None else probe.refusal


def stacked_threads(n_jobs, n_chunks, probe):
    """How many threads of this process train a tier's chunks: one on a GPU (its
    chunks run one after the other) and where a step is more Python than arithmetic
    (`_stacking.Probe.threaded`); else as many as `n_jobs` asks, the cores allow and
    there are chunks, each chunk on one core. Threads, not worker processes: such a
    step spends its time in torch's kernels, which leave Python's lock, and a worker
    process would first pay torch's start-up."""
    if not probe.threaded:
        return 1
    return max(1, min(effective_n_jobs(n_jobs), os.cpu_count() or 1, n_chunks))


def _iter_stacked(probe, tasks, template, seeds, n_jobs, verbose, shared):
    """`_fit_clone`'s results for every task, the nets trained together in chunks of
    ``probe.copies_per_chunk`` (consecutive tasks: results do not depend on `n_jobs`),
    in threads of this process (`stacked_threads`); a task whose rows hold one class
    fits alone (a constant model)."""
    from . import _stacking

    alone = [np.unique(task.y).size < 2 for task in tasks]
    stacked = [index for index, one_class in enumerate(alone) if not one_class]
    size = probe.chunk_size(len(stacked))
    chunks = [stacked[start : start + size] for start in range(0, len(stacked), size)]
    keywords = dict(shared, keep_models=shared["keep_model"], take_rows=take_rows,
                    model_type=ClassCodeModel, block_rows=probe.block_rows(size),
                    graphs=probe.graphs)
    del keywords["keep_model"]
    fit_chunk = carried(_stacking.fit_chunk)
    jobs = (delayed(fit_chunk)(template, [tasks[i] for i in chunk], [seeds[i] for i in chunk],
                               **keywords)
            for chunk in chunks)
    n_threads = stacked_threads(n_jobs, len(chunks), probe)
    pending = []
    # every thread's kernels on one core: the limits are the process's, set once here
    with one_thread():
        results = iter(Parallel(n_jobs=n_threads, backend="threading", verbose=verbose,
                                return_as="generator")(jobs))
        for index, task in enumerate(tasks):
            if alone[index]:
                yield _fit_clone(task, template, seeds[index], **shared)
                continue
            if not pending:
                pending = next(results)
            yield pending.pop(0)


def tier_entry(probe, estimator, n_stacked):
    """What `report_tier` records of a tier, but its size and time: the path `probe`
    chose (a `_stacking.Probe`, or the reason the clones fit one by one), the chunks of
    its `n_stacked` stacked nets, and torch networks' device."""
    if isinstance(probe, str):
        device = (str(_final_step(estimator).device or "cpu") if _is_torch_net(estimator)
                  else None)
        return dict(path="per-clone", reason=probe, chunks=None, device=device)
    return dict(path="stacked", reason=None, device=probe.device,
                chunks=-(-n_stacked // probe.chunk_size(n_stacked)))


def report_tier(say, tier, entry):
    """Record a fitted tier (see `recording_tiers`) and, for torch networks, say which
    path trained it."""
    record = _tiers.get()
    if record is not None:
        record.append(dict(tier=tier, **entry))
    if say is not None and entry["device"] is not None:
        nets = f"{entry['clones']} net{'s' * (entry['clones'] != 1)}"
        if entry["path"] == "stacked":
            say(f"{tier}: {nets} trained together in {entry['chunks']} chunk(s) on "
                f"{entry['device']} ({entry['seconds']:.1f} s)")
        else:
            say(f"{tier}: {nets} trained one by one ({entry['reason']}; "
                f"{entry['seconds']:.1f} s)")


def iter_clone_fits(tasks, X, *, n_classes, seeds, n_jobs=None, verbose=0, X_predict=None,
                    soft_votes=False, keep_models=True, score_training=False,
                    tier="clones", say=None):
    """Fit one clone per task in a single flat parallel batch, yielding results in order.

    Results are yielded as the batch runs (where the joblib backend can), so callers
    that reduce them, as `group_votes` does, hold only what they keep. Parameters are
    those of `fit_clones`; each item is a ``(model, predictions, training_accuracy,
    score)`` tuple of one task.
    """
    start = time.perf_counter()
    n_workers = min(effective_n_jobs(n_jobs), len(tasks))
    single_threaded = n_workers > 1
    # one template per distinct estimator: cloned and searched for parameters once
    templates = {}
    for task in tasks:
        if id(task.estimator) not in templates:
            templates[id(task.estimator)] = SeededTemplate(task.estimator, single_threaded)
    shared = dict(X=X, n_classes=n_classes, X_predict=X_predict, soft_votes=soft_votes,
                  keep_model=keep_models, score_training=score_training)
    check_tier(tasks, tier)
    probe = stacking_probe(tasks, X, seeds, n_classes, templates)
    template = templates[id(tasks[0].estimator)]
    if isinstance(probe, str):
        fits = _iter_per_clone(tasks, templates, seeds, n_jobs, n_workers, verbose, shared)
    else:
        fits = _iter_stacked(probe, tasks, template, seeds, n_jobs, verbose, shared)
    entry = tier_entry(probe, template.template,
                       sum(np.unique(task.y).size > 1 for task in tasks))
    for index, fit in enumerate(fits):
        if index == len(tasks) - 1:  # reported before the last: a caller may stop there
            report_tier(say, tier, dict(entry, clones=len(tasks),
                                        seconds=time.perf_counter() - start))
        yield fit


def _iter_per_clone(tasks, templates, seeds, n_jobs, n_workers, verbose, shared):
    """`_fit_clone` of every task, one clone at a time, in parallel batches."""
    work = [(task, templates[id(task.estimator)], seed) for task, seed in zip(tasks, seeds)]
    size = _batch_size(len(work), max(n_workers, 1),
                       0 if shared["X_predict"] is None else _num_samples(shared["X_predict"]),
                       shared["n_classes"], shared["soft_votes"])
    jobs = [delayed(carried(_recorded))(os.getpid(), _fit_batch, work[start : start + size],
                                        **shared)
            for start in range(0, len(work), size)]
    # threads of this process, for joblib's threading backend; worker processes and
    # a sequential fit set their own (`one_thread`)
    with one_thread() if n_workers > 1 else nullcontext():
        try:
            batches = Parallel(n_jobs=n_jobs, verbose=verbose, return_as="generator")(jobs)
        except ValueError as exc:
            if "does not support return_as" not in str(exc):
                raise
            # e.g. joblib's multiprocessing backend: the whole list at once
            batches = Parallel(n_jobs=n_jobs, verbose=verbose)(jobs)
        for batch, caught in batches:
            issue_worker_warnings(caught)
            yield from received(batch)


def fit_clones(tasks, X, *, n_classes, seeds, n_jobs=None, verbose=0, X_predict=None,
               soft_votes=False, keep_models=True, score_training=False,
               tier="clones", say=None):
    """Fit one clone per task in a single flat parallel batch.

    Parameters
    ----------
    tasks : list of Task
        The estimator to clone, the row indices the clone learns from (``None`` for all
        rows), their class codes and optional sample weights. Tasks carry indices,
        never copies of X.
    X : array-like, sparse matrix, DataFrame or StackedRows
        The rows the tasks index.
    n_classes : int
        Number of global classes.
    seeds : array-like of int of shape (n_tasks,)
        One seed per clone: it sets every ``random_state`` parameter of the clone (nested
        ones too) and torch's RNG, so results do not depend on `n_jobs` or the backend.
    n_jobs, verbose : int or None
        Passed to `sklearn.utils.parallel.Parallel`.
    X_predict : array-like, default=None
        Data each fitted clone votes on.
    soft_votes : bool, default=False
        Whether the votes on `X_predict` are class probabilities (a one-hot prediction
        for a clone without ``predict_proba``) instead of class codes.
    keep_models : bool, default=True
        Whether to return the fitted clones (teachers' are not kept).
    score_training : bool, default=False
        Whether to measure each clone's accuracy on its own training rows.
    tier : str, default="clones"
        The tier's name in what `recording_tiers` records and `say` prints.
    say : callable, default=None
        Prints which path trained a tier of torch networks (a plan's ``say``).

    Returns
    -------
    fits : CloneFits
    """
    models, accuracies, scores, predictions = [], [], [], None
    for index, (model, votes, accuracy, score) in enumerate(iter_clone_fits(
        tasks, X, n_classes=n_classes, seeds=seeds, n_jobs=n_jobs, verbose=verbose,
        X_predict=X_predict, soft_votes=soft_votes, keep_models=keep_models,
        score_training=score_training, tier=tier, say=say,
    )):
        if votes is not None:  # filled as they come: never a list and its stacked copy
            if predictions is None:
                predictions = np.empty((len(tasks), *votes.shape), dtype=votes.dtype)
            predictions[index] = votes
        models.append(model)
        accuracies.append(accuracy)
        scores.append(score)
    return CloneFits(
        models=models,
        predictions=predictions,
        training_accuracy=np.array(accuracies) if score_training else None,
        scores=scores,
    )


def group_votes(clone_fits, group_sizes, n_classes):
    """Vote histogram of each run of consecutive clones, as they finish.

    Parameters
    ----------
    clone_fits : iterable of (model, predictions, training_accuracy, score)
        As yielded by `iter_clone_fits` with an ``X_predict``.
    group_sizes : iterable of int
        Clones in each histogram, in order (the teachers of each partition, say).
    n_classes : int
        Number of global classes.

    Yields
    ------
    votes : ndarray of shape (n_predict, n_classes)
        Summed class probabilities (soft votes) or vote counts (class codes).
    """
    clone_fits = iter(clone_fits)
    for group_size in group_sizes:
        votes = None
        for _, predictions, _, _ in islice(clone_fits, group_size):
            if predictions.ndim == 1:
                predictions = count_votes(predictions[None], n_classes)
            else:
                predictions = predictions.astype(np.float64)
            votes = predictions if votes is None else votes + predictions
        yield votes


def ensemble_proba(models, X, n_classes, voting):
    """Class probabilities of an ensemble of `ClassCodeModel`, one column per class.

    ``voting="hard"`` gives each model's vote share; ``"soft"`` averages the models'
    probabilities, a model without ``predict_proba`` contributing its vote.
    """
    return sum(model.votes(X, n_classes, soft=voting == "soft") for model in models) / len(models)
