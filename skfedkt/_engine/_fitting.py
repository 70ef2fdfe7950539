"""Fitting many clones of base estimators in parallel, each on labels it can digest:
the tasks of a tier, the one choice of its path (its skorch nets trained together as
one stacked module, or one clone at a time in parallel batches), and what a tier
records."""

import contextvars
import functools
import os
import time
from contextlib import contextmanager, nullcontext
from itertools import islice
from typing import Callable, NamedTuple, Optional, TypedDict

import numpy as np
from joblib import effective_n_jobs
from sklearn.utils.parallel import Parallel, delayed

from .. import _config
from ._class_codes import ClassCodeModel, code_dtype, sample_weight_param
from ._compat import num_samples
from ._nets import ends_in_skorch_net, final_step, targets_for
from ._rows import take_rows
from ._seeds import SeededTemplate
from ._transport import (
    _recorded,
    carried,
    in_one_thread,
    issue_worker_warnings,
    map_in_parallel,
    one_thread,
    received,
)
from ._voting import count_votes


class Task(NamedTuple):
    """One clone to fit: an estimator, the rows it learns from and their labels."""

    estimator: object
    """The estimator to clone."""
    y: np.ndarray
    """Global class codes of the rows, aligned with `rows` (with every row of X if None)."""
    rows: Optional[np.ndarray] = None
    """Indices of the rows of X (repeats allowed); None for every row."""
    sample_weight: Optional[np.ndarray] = None
    """Weights aligned with `y`; None for unweighted rows."""
    score: Optional[Callable] = None
    """``score(model, X)``, run on the fitted clone where it was fit (say, its score on
    rows it held out), whose value comes back in `CloneFits.scores`; None for none."""
    name: Optional[str] = None
    """What the clone is, in messages ("party 'a', partition 1, teacher 2")."""


def clone_votes(model, X, n_classes, soft_votes):
    """A fitted clone's votes on `X`: class probabilities (float32, shape (n_samples,
    n_classes)) with `soft_votes`, else class codes (the smallest integer type)."""
    if soft_votes:
        # float32: one row of probabilities per public example and clone adds up
        return model.votes(X, n_classes, soft=True).astype(np.float32)
    return model.predict(X).astype(code_dtype(n_classes))


def predict_votes(models, X, *, n_classes, soft_votes, n_jobs=None):
    """`clone_votes` of every fitted clone, in one flat parallel batch, stacked."""
    votes_of = functools.partial(clone_votes, X=X, n_classes=n_classes,
                                 soft_votes=soft_votes)
    return np.stack(map_in_parallel(votes_of, models, n_jobs))


class TierJob(NamedTuple):
    """What every clone of a tier learns from and gives back: one description of the
    tier's job, which travels whole to the workers and the stacked path."""

    X: object
    """The rows the tasks index: array-like, sparse matrix, DataFrame or `StackedRows`."""
    n_classes: int
    """Number of global classes."""
    X_predict: object = None
    """Rows each fitted clone votes on, or None."""
    soft_votes: bool = False
    """Whether the votes on `X_predict` are class probabilities (a one-hot prediction
    for a clone without ``predict_proba``) instead of class codes."""
    keep_models: bool = True
    """Whether to return the fitted clones (teachers' are not kept)."""
    score_training: bool = False
    """Whether to measure each clone's accuracy on its own training rows."""


def _fit_clone(task, template, seed, job):
    X = take_rows(job.X, task.rows)
    model = ClassCodeModel.fit(template.clone(seed), X, task.y, job.n_classes,
                               task.sample_weight)
    predictions = None if job.X_predict is None else clone_votes(
        model, job.X_predict, job.n_classes, job.soft_votes
    )
    training_accuracy = np.mean(model.predict(X) == task.y) if job.score_training else None
    score = None if task.score is None else task.score(model, job.X)
    return (model if job.keep_models else None), predictions, training_accuracy, score


def _fit_batch(batch, job):
    """`_fit_clone` of every ``(task, template, seed)`` of `batch`, in order, each
    on one thread (`one_thread`): one parallel job for several small fits, which
    pays one dispatch for all of them."""
    with one_thread():
        return [_fit_clone(task, template, seed, job) for task, template, seed in batch]


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
    predictions: Optional[np.ndarray]
    """Predictions on ``X_predict``: class codes of shape (n_tasks, n_predict), or class
    probabilities of shape (n_tasks, n_predict, n_classes) with `soft_votes`; or None."""
    training_accuracy: Optional[np.ndarray]
    """Accuracy of each clone on its own training rows, or None."""
    scores: list
    """What each task's `Task.score` gave (None for a task without one)."""


class TierRecord(TypedDict, total=False):
    """What `recording_tiers` records of a fitted tier (a meta-estimator's
    ``tier_fits_``): `tier_entry`'s keys, then its name, clones and seconds."""

    tier: str
    clones: int
    path: str
    """``"stacked"`` or ``"per-clone"``."""
    reason: Optional[str]
    """Why its clones (or some chunks) trained one by one, or None."""
    chunks: Optional[int]
    device: Optional[str]
    """Where its torch networks trained; None for other models."""
    seconds: float


# what the current call of a meta-estimator's method records of each tier it fits
# (see `recording_tiers`)
_tiers: contextvars.ContextVar[Optional[list[TierRecord]]] = contextvars.ContextVar(
    "skfedkt_tiers", default=None)


@contextmanager
def recording_tiers():
    """Within, every tier of clones fitted is recorded in the list this yields: one
    dict per tier (``tier``, ``clones``, ``path``, ``reason``, ``chunks``, ``device``,
    ``seconds``), where a meta-estimator reads its ``tier_fits_``."""
    record: list[TierRecord] = []
    token = _tiers.set(record)
    try:
        yield record
    finally:
        _tiers.reset(token)


def check_tier(tasks, tier):
    """Refuse, before any of its fits, a tier whose skorch nets cannot split some
    clone's rows for their own validation (`_skorch_checks`)."""
    for estimator in {id(task.estimator): task.estimator for task in tasks}.values():
        if ends_in_skorch_net(estimator):
            from ._skorch_checks import check_validation_splits

            check_validation_splits(
                final_step(estimator),
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
    if not ends_in_skorch_net(template.template):
        return f"{type(final_step(template.template)).__name__} is not a torch network"
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


def _chunk_or_one_by_one(together, one_by_one, chunk):
    """``(together(chunk), None)``, or where the chunk meets what the tier's probe did
    not and cannot stack (`_stacking.CannotStack`), ``(one_by_one(chunk), why)``."""
    from ._stacking import CannotStack

    try:
        return together(chunk), None
    except CannotStack as exc:
        return one_by_one(chunk), str(exc)


def fit_in_chunks(probe, indices, n_jobs, together, one_by_one, fallbacks, verbose=0):
    """The stacked path of a tier, for every algorithm: its items `indices` in chunks
    of consecutive items (``probe.chunk_size``: results do not depend on `n_jobs`),
    each trained by ``together(chunk)`` in threads of this process
    (`stacked_threads`), every thread's kernels on one core. A chunk that cannot stack
    after all is fitted by ``one_by_one(chunk)``, and why is appended to `fallbacks`.
    Yields each chunk's list of results, in order."""
    size = probe.chunk_size(len(indices))
    chunks = [indices[start : start + size] for start in range(0, len(indices), size)]
    run = carried(functools.partial(_chunk_or_one_by_one, together, one_by_one))
    jobs = (delayed(run)(chunk) for chunk in chunks)
    # the limits are the process's, set once here
    with one_thread():
        for results, fallback in Parallel(
                n_jobs=stacked_threads(n_jobs, len(chunks), probe), backend="threading",
                verbose=verbose, return_as="generator")(jobs):
            if fallback is not None:
                fallbacks.append(fallback)
            yield results


def _iter_stacked(probe, tasks, template, seeds, job, n_jobs, verbose, fallbacks):
    """`_fit_clone`'s results for every task, the nets trained together in chunks
    (`fit_in_chunks`); a task whose rows hold one class fits alone (a constant
    model)."""
    from . import _stacking

    alone = [np.unique(task.y).size < 2 for task in tasks]
    stacked = [index for index, one_class in enumerate(alone) if not one_class]
    block_rows = probe.block_rows(probe.chunk_size(len(stacked)))

    def together(chunk):
        return _stacking.fit_chunk(template, [tasks[i] for i in chunk],
                                   [seeds[i] for i in chunk], job, block_rows, probe.graphs)

    def one_by_one(chunk):
        return [_fit_clone(tasks[i], template, seeds[i], job) for i in chunk]

    chunks = fit_in_chunks(probe, stacked, n_jobs, together, one_by_one, fallbacks, verbose)
    pending: list = []  # the results of the chunk in hand, in order
    for index, task in enumerate(tasks):
        if alone[index]:
            yield _fit_clone(task, template, seeds[index], job)
            continue
        if not pending:
            pending = next(chunks)
        yield pending.pop(0)


def tier_entry(probe, estimator, n_stacked, fallbacks=()):
    """What `report_tier` records of a tier, but its size and time: the path `probe`
    chose (a `_stacking.Probe`, or the reason the clones fit one by one), the chunks of
    its `n_stacked` stacked nets, and torch networks' device; `fallbacks`: why chunks
    that could not stack after all were fitted one by one (`fit_in_chunks`)."""
    if isinstance(probe, str):
        device = (str(final_step(estimator).device or "cpu") if ends_in_skorch_net(estimator)
                  else None)
        return TierRecord(path="per-clone", reason=probe, chunks=None, device=device)
    n_chunks = -(-n_stacked // probe.chunk_size(n_stacked))
    reason = (None if not fallbacks else f"{len(fallbacks)} of {n_chunks} chunk(s) trained "
              f"one by one: {fallbacks[0]}")
    return TierRecord(path="stacked", reason=reason, device=probe.device, chunks=n_chunks)


def report_tier(say, tier, entry):
    """Record a fitted tier (see `recording_tiers`) and, for torch networks, say which
    path trained it."""
    record = _tiers.get()
    if record is not None:
        record.append(TierRecord(tier=tier, **entry))
    if say is not None and entry["device"] is not None:
        nets = f"{entry['clones']} net{'s' * (entry['clones'] != 1)}"
        if entry["path"] == "stacked":
            say(f"{tier}: {nets} trained together in {entry['chunks']} chunk(s) on "
                f"{entry['device']} ({entry['seconds']:.1f} s)")
        else:
            say(f"{tier}: {nets} trained one by one ({entry['reason']}; "
                f"{entry['seconds']:.1f} s)")


def iter_clone_fits(tasks, job, seeds, *, n_jobs=None, verbose=0, tier="clones", say=None):
    """Fit one clone per task in a single flat parallel batch, yielding results in order.

    Results are yielded as the batch runs (where the joblib backend can), so callers
    that reduce them, as `group_votes` does, hold only what they keep. Parameters are
    those of `fit_clones`; each item is a ``(model, predictions, training_accuracy,
    score)`` tuple of one task.
    """
    if not tasks:  # a party too small to train anything, on its own machine
        return
    start = time.perf_counter()
    n_workers = min(effective_n_jobs(n_jobs), len(tasks))
    single_threaded = n_workers > 1
    # one template per distinct estimator: cloned and searched for parameters once
    templates = {}
    for task in tasks:
        if id(task.estimator) not in templates:
            templates[id(task.estimator)] = SeededTemplate(task.estimator, single_threaded)
    check_tier(tasks, tier)
    probe = stacking_probe(tasks, job.X, seeds, job.n_classes, templates)
    template = templates[id(tasks[0].estimator)]
    fallbacks: list[str] = []
    if isinstance(probe, str):
        fits = _iter_per_clone(tasks, templates, seeds, job, n_jobs, n_workers, verbose)
    else:
        fits = _iter_stacked(probe, tasks, template, seeds, job, n_jobs, verbose, fallbacks)
    n_stacked = sum(np.unique(task.y).size > 1 for task in tasks)
    for index, fit in enumerate(fits):
        if index == len(tasks) - 1:  # reported before the last: a caller may stop there
            entry = tier_entry(probe, template.template, n_stacked, fallbacks)
            report_tier(say, tier, dict(entry, clones=len(tasks),
                                        seconds=time.perf_counter() - start))
        yield fit


def _iter_per_clone(tasks, templates, seeds, job, n_jobs, n_workers, verbose):
    """`_fit_clone` of every task, one clone at a time, in parallel batches."""
    work = [(task, templates[id(task.estimator)], seed) for task, seed in zip(tasks, seeds)]
    size = _batch_size(len(work), max(n_workers, 1),
                       0 if job.X_predict is None else num_samples(job.X_predict),
                       job.n_classes, job.soft_votes)
    run = carried(_recorded)
    jobs = [delayed(run)(os.getpid(), _fit_batch, work[start : start + size], job)
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


def fit_clones(tasks, job, seeds, *, n_jobs=None, verbose=0, tier="clones", say=None):
    """Fit one clone per task in a single flat parallel batch.

    Parameters
    ----------
    tasks : list of Task
        The estimator to clone, the row indices the clone learns from (``None`` for all
        rows), their class codes and optional sample weights. Tasks carry indices,
        never copies of X.
    job : TierJob
        The rows the tasks index, the number of classes, and what every clone gives
        back (votes on ``X_predict``, the fitted clone, its training accuracy).
    seeds : array-like of int of shape (n_tasks,)
        One seed per clone: it sets every ``random_state`` parameter of the clone (nested
        ones too) and torch's RNG, so results do not depend on `n_jobs` or the backend.
    n_jobs, verbose : int or None
        Passed to `sklearn.utils.parallel.Parallel`.
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
        tasks, job, seeds, n_jobs=n_jobs, verbose=verbose, tier=tier, say=say,
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
        training_accuracy=np.array(accuracies) if job.score_training else None,
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
