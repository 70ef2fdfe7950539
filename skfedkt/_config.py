"""The package's configuration: switches of the engine, which change how a fit runs and
not what it learns, kept out of every estimator's parameters as scikit-learn keeps
``array_api_dispatch`` in its own configuration.

Like scikit-learn's, the configuration belongs to a thread: `set_config` and
`config_context` change the calling thread's, and the engine carries it into the worker
processes and threads of its own parallel batches. Workers started by another library
(``GridSearchCV(n_jobs=2)``) begin from the defaults, which the environment sets:
``SKFEDKT_STACK_NETWORKS=0`` turns the stacked path off there too, and
``SKFEDKT_SECURE_AGGREGATION=1`` secure aggregation on.
"""

import os
import threading
from contextlib import contextmanager


def _environment_switch(name, default):
    """The switch the environment variable `name` sets ("0", "false", "no", "off":
    off; anything else: on), `default` where it is unset or empty."""
    value = os.environ.get(name, "").strip().lower()
    return default if not value else value not in ("0", "false", "no", "off")


_SECURE_MODES = (False, True, "masked", "validated")


def _secure_mode(value: str):
    """SKFEDKT_SECURE_AGGREGATION's setting: "validated" or "masked" by name, else the
    switch's (unset, empty, 0, false, no, off: off; anything else: on, masked)."""
    value = value.strip().lower()
    return value if value in ("masked", "validated") else (
        bool(value) and value not in ("0", "false", "no", "off"))


_DEFAULTS = {
    "stack_networks": _environment_switch("SKFEDKT_STACK_NETWORKS", True),
    "secure_aggregation": _secure_mode(os.environ.get("SKFEDKT_SECURE_AGGREGATION", "")),
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
        ``stack_networks`` and ``secure_aggregation`` (see `set_config`).

    Examples
    --------
    >>> import skfedkt
    >>> skfedkt.get_config()
    {'stack_networks': True, 'secure_aggregation': False}
    """
    return dict(_thread_config())


def set_config(stack_networks=None, secure_aggregation=None):
    """Set the configuration of the calling thread (None leaves a setting as it is).

    Parameters
    ----------
    stack_networks : bool, default=None
        Whether the clones of a tier that are one skorch net train together as one
        stacked module, each as its own ``fit`` would train it (True, the default), or
        one by one, each through skorch's own loop. It changes how the networks train,
        not what they learn: stacked networks differ from separate fits by rounding.
        Every fitted estimator's ``tier_fits_`` says which path each tier took.
    secure_aggregation : {False, True, "masked", "validated"}, default=None
        Whether ``fit`` hands the server only the sums of what the parties send
        (False, the default: each party's upload). Under it, what the algorithm's
        server needs in sum only (votes, label and class counts, weights times rows)
        leaves each party hidden, no model of a party reaches the server, and at
        FedKT's L1 the parties add the noise in shares. An algorithm or option that
        needs more than sums is refused before any work, naming why. How the sum
        hides them is the mode: ``"masked"`` (or True), a secure sum (Bonawitz et al.,
        2017) that the simulated server unmasks only as a total, which checks nothing
        of a party's input beyond what the total shows; ``"validated"``, two
        aggregators that must not collude, each holding a share of every input, check
        each party's proofs that its values are what their declaration allows (counts
        in range, rows that add up; Prio3 of draft-irtf-cfrg-vdaf) and add those that
        pass, so that one party cannot steer the sums beyond its own valid input; a
        party whose proof fails is named in a warning and left out. Floats are
        validated in fixed point of 2**-16. Deployed steps (``fit_party``,
        ``fit_server``, the command line, Flower) run the mode their secure session
        names: a session with a helper is validated, and its steps run under
        "validated". Workers that another library
        starts (``GridSearchCV(n_jobs=2)``) begin from the defaults: set
        ``SKFEDKT_SECURE_AGGREGATION=1`` (or ``validated``) in the environment for
        them.

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
    if secure_aggregation is not None:
        if not any(secure_aggregation is mode or (isinstance(mode, str) and
                                                  secure_aggregation == mode)
                   for mode in _SECURE_MODES):
            raise TypeError(f"secure_aggregation must be True, False, 'masked' or "
                            f"'validated', got {secure_aggregation!r}.")
        _thread_config()["secure_aggregation"] = secure_aggregation


@contextmanager
def config_context(*, stack_networks=None, secure_aggregation=None):
    """Within, the calling thread's configuration is changed as `set_config` would
    change it, and restored after.

    Parameters
    ----------
    stack_networks : bool, default=None
        See `set_config`.
    secure_aggregation : {False, True, "masked", "validated"}, default=None
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
    set_config(stack_networks=stack_networks, secure_aggregation=secure_aggregation)
    try:
        yield
    finally:
        set_config(**before)
