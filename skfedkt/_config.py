"""The package's configuration: switches of the engine, which change how a fit runs and
not what it learns, kept out of every estimator's parameters as scikit-learn keeps
``array_api_dispatch`` in its own configuration.

Like scikit-learn's, the configuration belongs to a thread: `set_config` and
`config_context` change the calling thread's, and the engine carries it into the worker
processes and threads of its own parallel batches. Workers started by another library
(``GridSearchCV(n_jobs=2)``) begin from the defaults, which the environment sets:
``SKFEDKT_STACK_NETWORKS=0`` turns the stacked path off there too.
"""

import os
import threading
from contextlib import contextmanager

_DEFAULTS = {
    "stack_networks": os.environ.get("SKFEDKT_STACK_NETWORKS", "1").strip().lower()
    not in ("0", "false", "no", "off"),
}
_local = threading.local()


def _thread_config():
    if not hasattr(_local, "config"):
        _local.config = dict(_DEFAULTS)
    return _local.config


def get_config():
    """The configuration of the calling thread.

    Returns
    -------
    config : dict
        ``stack_networks`` (see `set_config`).

    Examples
    --------
    >>> import skfedkt
    >>> skfedkt.get_config()
    {'stack_networks': True}
    """
    return dict(_thread_config())


def set_config(stack_networks=None):
    """Set the configuration of the calling thread (None leaves a setting as it is).

    Parameters
    ----------
    stack_networks : bool, default=None
        Whether the clones of a tier that are one skorch net train together as one
        stacked module, each as its own ``fit`` would train it (True, the default), or
        one by one, each through skorch's own loop. It changes how the networks train,
        not what they learn: stacked networks differ from separate fits by rounding.
        Every fitted estimator's ``tier_fits_`` says which path each tier took.

    Examples
    --------
    >>> import skfedkt
    >>> skfedkt.set_config(stack_networks=False)
    >>> skfedkt.get_config()["stack_networks"]
    False
    >>> skfedkt.set_config(stack_networks=True)
    """
    if stack_networks is not None:
        if not isinstance(stack_networks, bool):
            raise TypeError(f"stack_networks must be True or False, got {stack_networks!r}.")
        _thread_config()["stack_networks"] = stack_networks


@contextmanager
def config_context(*, stack_networks=None):
    """Within, the calling thread's configuration is changed as `set_config` would
    change it, and restored after.

    Parameters
    ----------
    stack_networks : bool, default=None
        See `set_config`.

    Examples
    --------
    >>> import skfedkt
    >>> with skfedkt.config_context(stack_networks=False):
    ...     skfedkt.get_config()["stack_networks"]
    False
    >>> skfedkt.get_config()["stack_networks"]
    True
    """
    before = get_config()
    set_config(stack_networks=stack_networks)
    try:
        yield
    finally:
        set_config(**before)
