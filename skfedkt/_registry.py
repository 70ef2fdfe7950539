"""The algorithms' declarations: each algorithm package fills this registry with one
`register` call, and the command line, the Flower apps and the audit learn what they
need from it and from the estimator class, never from a table of names.

An `Algorithm` says what the command line shows of it: its name, its flags (an argument
group that `add_options` fills, and `options`, which turns the parsed flags into the
class's keyword arguments), whether the deployment commands run it, and the
configurations (`Method`) the experiment runner compares. Everything else - whether
the public set is needed, what an upload holds, whether the server runs rounds - the
callers ask the estimator (`BaseFederatedClassifier`'s hooks).
"""

import argparse
from dataclasses import dataclass, field
from typing import Callable


class OptionError(ValueError):
    """Flags that contradict each other: the command line prints the message and exits
    with status 2, as for a bad argument."""


def positive(kind):
    """An argparse type: a number of `kind` above 0."""

    def parse(text):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if value <= 0:
            raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
        return value

    return parse


def fraction(closed):
    """An argparse type: a number in (0, 1], or (0, 1) unless `closed`."""

    def parse(text):
        value = positive(float)(text)
        if value > 1 or (value == 1 and not closed):
            raise argparse.ArgumentTypeError(f"must be {'<=' if closed else '<'} 1, got {text}")
        return value

    return parse


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
    prepare: Callable = None
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
    add_options: Callable
    """``add_options(group)``: add its flags to an argparse argument group."""
    options: Callable
    """``options(args)``: its keyword arguments from the parsed flags; an `OptionError`
    for flags that contradict each other."""
    methods: tuple = ()
    listed: int = 100
    """Its place in lists and tables (smaller first)."""
    deployed: bool = True
    """Whether ``skfedkt party``, ``server`` and ``audit`` run it (its flags then
    appear there too)."""
    accountant: str = ""
    """How its epsilon is accounted, in words for the runner's table."""
    flags: dict = field(default_factory=dict)
    """Its parameter names as the flags a user types, for the runner's errors."""


_ALGORITHMS = {}


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
    listed = sorted(_ALGORITHMS.values(), key=lambda algorithm: algorithm.listed)
    return [algorithm for algorithm in listed if algorithm.deployed or not deployed]


def algorithm(name):
    """The registered algorithm called `name`."""
    return _ALGORITHMS[name]


def methods():
    """Every registered algorithm's methods, by name, in the algorithms' order."""
    return {method.name: method for algorithm in algorithms() for method in algorithm.methods}
