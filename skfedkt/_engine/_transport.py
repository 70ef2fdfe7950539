"""How work crosses to the engine's workers and back: one flat parallel batch under the
caller's configuration, results by value (what a script defined in ``__main__``
included), the warnings workers raise issued once in the caller, and kernels held to
one thread per worker."""

import contextvars
import functools
import io
import os
import pickle
import re
import sys
import threading
import types
import warnings
from contextlib import contextmanager
from typing import Optional

try:  # the cloudpickle loky sends calls with: joblib's own copy before joblib 1.5
    from joblib.externals import cloudpickle
except ImportError:
    import cloudpickle
from sklearn.utils.parallel import Parallel, delayed
from threadpoolctl import ThreadpoolController

from .. import _config
from ._compat import classes_received_by_value

# the kinds of warning already issued from worker processes in the current call of a
# meta-estimator's method (see `warnings_once_per_call`)
_issued: contextvars.ContextVar[Optional[set]] = contextvars.ContextVar(
    "skfedkt_worker_warnings", default=None)


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
    caught: list[tuple[type, str]] = []
    if os.getpid() == main_pid or threading.current_thread() is not threading.main_thread():
        yield caught
        return
    with warnings.catch_warnings(record=True) as records:
        warnings.simplefilter("always")
        yield caught
    kinds: dict[tuple[type, str], tuple[type, str]] = {}
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
_named_in_main: set[str] = set()


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
    for cls in classes_received_by_value(cloudpickle):
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
    threads = 1 if torch is None else torch.get_num_threads()
    with _thread_pools().limit(limits=1):
        if torch is not None and threads != 1:
            torch.set_num_threads(1)
        try:
            yield
        finally:
            if torch is not None and threads != 1:
                torch.set_num_threads(threads)


def in_one_thread(function, *args, **kwargs):
    """``function(*args, **kwargs)`` within `one_thread`."""
    with one_thread():
        return function(*args, **kwargs)
