"""The algorithms' declarations: each algorithm package fills this registry with one
`register` call, and the command line, the Flower apps, the audit and the model files
learn what they need from it and from the estimator class, never from a table of
names.

An `Algorithm` says what the command line shows of it: its name, its flags (`Flag`:
data, from which the command line makes its options; no algorithm sees argparse), how
its flags' values become the class's keyword arguments, whether the deployment
commands run it, and the configurations (`Method`) the experiment runner compares.
and what its lines say of an upload, a round and rounds that did not settle.
Everything else - whether the public set is needed, what an upload holds, whether the
server runs rounds - the callers ask the estimator and its plan
(`BaseFederatedClassifier`'s declarations).
"""

from __future__ import annotations

import warnings
from contextlib import contextmanager
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Any, Callable, Iterator


class OptionError(ValueError):
    """Flags that contradict each other: the command line prints the message and exits
    with status 2, as for a bad argument."""


def positive(kind):
    """A flag's type: a number of `kind` above 0 (a ValueError says what is wrong)."""

    def parse(text):
        try:
            value = kind(text)
        except ValueError:
            raise ValueError(f"{text!r} is not a number") from None
        if value <= 0:
            raise ValueError(f"must be > 0, got {text}")
        return value

    return parse


def fraction(closed):
    """A flag's type: a number in (0, 1], or (0, 1) unless `closed`."""

    def parse(text):
        value = positive(float)(text)
        if value > 1 or (value == 1 and not closed):
            raise ValueError(f"must be {'<=' if closed else '<'} 1, got {text}")
        return value

    return parse


@dataclass(frozen=True)
class Flag:
    """One command-line flag of an algorithm, as data: the command line makes its
    option (in the runner, and in the deployment commands of a deployed algorithm)
    and hands its value back by `key`."""

    name: str
    """As a user types it: ``--rounds``. Two algorithms may declare the same name."""
    help: str
    type: Callable = str
    """Parses the typed text; a ValueError says what is wrong with it."""
    default: Any = None
    """Its value where it is not given."""
    choices: tuple[Any, ...] | None = None
    parameter: str | None = None
    """The class parameter it sets as it is, if one: the algorithm needs no code for
    it, and the runner's errors about that parameter name the flag."""

    @property
    def key(self):
        """Its value's name: ``rounds`` for ``--rounds``."""
        return self.name.lstrip("-").replace("-", "_")


@dataclass(frozen=True)
class Method:
    """A configuration of an algorithm that the experiment runner (``skfedkt run``)
    compares: ``make(estimator, options, common)`` returns the meta-estimator around
    the base `estimator`, from ``options`` (every algorithm's keyword arguments, by
    algorithm name) and ``common`` (``n_jobs``, ``random_state``, ``verbose``)."""

    name: str
    description: str
    make: Callable
    by_default: bool = False
    """Whether ``skfedkt run`` compares it when no ``--algorithms`` are given."""
    one_party: bool = False
    """Fit with one party holding every row (not federated: a reference)."""
    needs_estimator: tuple = ()
    """``(name, why)``: the one ``--estimator`` it runs with, and why (a sentence whose
    ``{names}`` the methods that need it fill)."""
    prepare: Callable[..., Any] | None = None
    """``prepare(estimator, X_public)``: the base estimator it fits, if not `estimator`."""


@dataclass(frozen=True)
class Algorithm:
    """One algorithm, as its package declares it to the command line."""

    name: str
    """Its name on the command line (``skfedkt party <name>``)."""
    estimator_class: type
    """Its `BaseFederatedClassifier`; the deployment commands call it as
    ``estimator_class(base_estimator, **options(args), n_jobs=..., random_state=...,
    verbose=...)``."""
    title: str
    """The title of its group of flags in ``--help``."""
    flags: tuple = ()
    """Its `Flag` s."""
    options: Callable[[Any], dict[str, Any]] | None = None
    """``options(values)``: its keyword arguments beyond the flags that set a
    `Flag.parameter` as they are, from its flags' values (a namespace: each flag's
    value by its `Flag.key`, its default where not given); an `OptionError` for flags
    that contradict each other."""
    methods: tuple = ()
    listed: int = 100
    """Its place in lists and tables (smaller first)."""
    deployed: bool = True
    """Whether ``skfedkt party``, ``server`` and ``audit`` run it (its flags then
    appear there too)."""
    accountant: str = ""
    """How its epsilon is accounted, in words for the runner's table."""
    model_types: tuple = ()
    """The classes of its own, beyond `estimator_class` and its parameter objects, that
    a fitted model holds (a privacy report it makes without a mechanism, say): model
    files trust them (`trusted_model_types`)."""
    describe_upload: Callable[[Any], str] | None = None
    """``describe_upload(upload)``: what one of its uploads holds, in a few words, for
    the deployment commands' lines; None: its plan's ``upload_kind``."""
    describe_round: Callable[[Any], str] | None = None
    """With rounds: ``describe_round(message)``, what the round of the server's
    `message` changed, in a few words ending in "; " (the deployment commands'
    lines); None: nothing."""
    unsettled_share: Callable[[Any], float] | None = None
    """``unsettled_share(estimator)``: after a fit whose rounds stopped at their cap,
    the share of what the last round shares that it still changed (FedCT: the
    consensus labels), NaN when the rounds converged; for the runner's table. None:
    always NaN."""
    unsettled_what: str = "its consensus labels"
    """What `unsettled_share` is a share of, in the runner's words ("2.8% of its
    consensus labels still changing")."""

    def keyword_arguments(self, values):
        """Its class's keyword arguments from its flags' `values` (see `options`)."""
        arguments = {flag.parameter: getattr(values, flag.key)
                     for flag in self.flags if flag.parameter is not None}
        if self.options is not None:
            arguments.update(self.options(values))
        return arguments


_ALGORITHMS: dict[str, Algorithm] = {}

# where an algorithm installed as a distribution of its own declares itself: in its
# pyproject.toml, ``[project.entry-points."skfedkt.algorithms"] NAME = "pkg.module:ALGORITHM"``
ENTRY_POINT_GROUP = "skfedkt.algorithms"
_plugins = {"loaded": False}


class PluginWarning(UserWarning):
    """An algorithm installed as a plugin (`ENTRY_POINT_GROUP`) that could not be
    loaded: the others stay available."""


def _load_plugins():
    """Import, once, every algorithm installed as a distribution of its own: its entry
    point names the `Algorithm` its module registers (or this registers it). A plugin
    that fails to load is left out with a `PluginWarning` naming its distribution."""
    if _plugins["loaded"]:
        return
    _plugins["loaded"] = True
    for entry in entry_points(group=ENTRY_POINT_GROUP):
        distribution = getattr(entry.dist, "name", "an unnamed distribution")
        try:
            declared = entry.load()
            if not isinstance(declared, Algorithm):
                raise TypeError(f"{entry.value} is a {type(declared).__name__}, not an "
                                "skfedkt._registry.Algorithm")
            if declared.name != entry.name:
                raise ValueError(f"the entry point is named {entry.name!r}, its algorithm "
                                 f"{declared.name!r}")
            if _ALGORITHMS.get(declared.name) is not declared:
                register(declared)
        except Exception as exc:  # a broken plugin must not take the others down
            warnings.warn(f"The algorithm {entry.name!r} that {distribution} installs "
                          f"({ENTRY_POINT_GROUP}) was not loaded: {type(exc).__name__}: "
                          f"{exc}", PluginWarning, stacklevel=2)


def _registered():
    """The registry, with the installed plugins loaded."""
    _load_plugins()
    return _ALGORITHMS


@contextmanager
def isolated_registry() -> Iterator[None]:
    """Within, algorithms registered (by importing their package, say) are forgotten
    on exit: a test that registers one leaks it into no other test."""
    saved = dict(_registered())
    try:
        yield
    finally:
        _ALGORITHMS.clear()
        _ALGORITHMS.update(saved)


def register(algorithm):
    """Declare `algorithm` (an `Algorithm`) to the command line and the Flower apps;
    a second declaration of a name is refused."""
    if algorithm.name in _ALGORITHMS:
        raise ValueError(f"An algorithm named {algorithm.name!r} is already registered.")
    _ALGORITHMS[algorithm.name] = algorithm
    return algorithm


def algorithms(deployed=False):
    """The registered algorithms in their listed order (only the deployed ones with
    `deployed`)."""
    listed = sorted(_registered().values(), key=lambda algorithm: algorithm.listed)
    return [algorithm for algorithm in listed if algorithm.deployed or not deployed]


def algorithm(name):
    """The registered algorithm called `name`."""
    return _registered()[name]


def declaration_of(estimator):
    """The declaration of `estimator`'s class, or None where no algorithm declares it."""
    return next((declared for declared in _registered().values()
                 if declared.estimator_class is type(estimator)), None)


def methods():
    """Every registered algorithm's methods, by name, in the algorithms' order."""
    return {method.name: method for algorithm in algorithms() for method in algorithm.methods}


def trusted_model_types():
    """The classes a model file of a registered algorithm may hold, by every
    algorithm's declaration: its estimator class, its `model_types`, and the parameter
    objects its ``_parameter_constraints`` admit (classes that are scikit-learn
    estimators, such as a privacy mechanism) with what each declares it leaves in a
    fitted model (its ``fitted_types``)."""
    from sklearn.base import BaseEstimator

    trusted: set[type] = set()
    for declared in _registered().values():
        trusted.update((declared.estimator_class, *declared.model_types))
        for constraints in declared.estimator_class._parameter_constraints.values():
            for constraint in constraints:
                if isinstance(constraint, type) and issubclass(constraint, BaseEstimator):
                    trusted.update((constraint, *getattr(constraint, "fitted_types", ())))
    return trusted
