"""The algorithms' flags as argparse options.

Each algorithm declares its flags as data (`skfedkt._registry.Flag`); here they become
the options of the commands that run it, one group per algorithm. A flag that several
algorithms declare is one option, shown in a group of its own with each one's help, and
its text is parsed by each algorithm's own type. In the deployment commands, which
run one algorithm, a flag that only other algorithms declare is refused.
"""

import argparse
from types import SimpleNamespace

from .._registry import Algorithm, Flag, OptionError, algorithms


def argparse_type(parse):
    """`parse` (a flag's type) as an argparse type: its ValueError's message is the
    error argparse prints. Python's own types keep argparse's message."""
    if parse in (int, float, str):
        return parse

    def parsed(text):
        try:
            return parse(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    return parsed


def _declared(deployed):
    """Each flag name, with the algorithms that declare it and their `Flag`s."""
    owners: dict[str, list[tuple[Algorithm, Flag]]] = {}
    for algorithm in algorithms(deployed=deployed):
        for flag in algorithm.flags:
            owners.setdefault(flag.name, []).append((algorithm, flag))
    return owners


def _with_default(flag):
    # the default once, as the help formatter shows it (not where the help says it)
    if flag.default is None or "default" in flag.help:
        return flag.help
    return f"{flag.help} (default: {flag.default})"


def add_algorithm_flags(parser, deployed):
    """Every registered algorithm's flags (the deployed ones' with `deployed`), a group
    per algorithm and one for the flags several declare. No option has an argparse
    default: a flag not given is None, and takes its declared default in
    `algorithm_options`."""
    owners = _declared(deployed)
    for algorithm in algorithms(deployed=deployed):
        group = parser.add_argument_group(algorithm.title)
        for flag in algorithm.flags:
            if len(owners[flag.name]) == 1:
                group.add_argument(flag.name, type=argparse_type(flag.type),
                                   choices=flag.choices, help=_with_default(flag))
    shared = {name: declared for name, declared in owners.items() if len(declared) > 1}
    if shared:
        group = parser.add_argument_group("flags of several algorithms")
        for name, declared in shared.items():
            group.add_argument(name, metavar=declared[0][1].key.upper(), help="; ".join(
                f"{owner.name}: {_with_default(own)}" for owner, own in declared))


def _parsed(flag, text):
    """A shared flag's text, parsed as `flag` declares it."""
    try:
        value = flag.type(text)
    except ValueError as exc:
        raise OptionError(f"argument {flag.name}: {exc}") from None
    if flag.choices is not None and value not in flag.choices:
        raise OptionError(f"argument {flag.name}: invalid choice: {text!r} (choose from "
                          f"{', '.join(map(repr, flag.choices))})")
    return value


def algorithm_options(args):
    """Each algorithm's keyword arguments from the parsed flags, by algorithm name: every
    registered algorithm's in the runner, the deployed ones' in the deployment commands,
    which refuse a flag that is not their algorithm's. An `OptionError` names a flag
    that does not parse, or that contradicts another."""
    deployed = args.command != "run"
    owners = _declared(deployed)
    if deployed:
        for name, declared in owners.items():
            names = [owner.name for owner, _ in declared]
            if getattr(args, declared[0][1].key) is not None and args.algorithm not in names:
                owners_in_words = (f"{', '.join(names[:-1])} and {names[-1]}"
                                   if len(names) > 1 else names[0])
                raise OptionError(f"{name} is a flag of {owners_in_words}, not of "
                                  f"{args.algorithm}: leave it out, or run {names[0]}")
    options = {}
    for algorithm in algorithms(deployed=deployed):
        values = {}
        for flag in algorithm.flags:
            given = getattr(args, flag.key)
            if given is None:
                values[flag.key] = flag.default
            else:
                values[flag.key] = (_parsed(flag, given) if len(owners[flag.name]) > 1
                                    else given)
        options[algorithm.name] = algorithm.keyword_arguments(SimpleNamespace(**values))
    return options


def parameter_flags():
    """The flag of each class parameter that one flag sets, across the algorithms, for
    the runner's errors: only names with an underscore, which no prose uses (``voting``
    stays a word), and not a parameter that flags of several algorithms set (the error
    does not say whose it is)."""
    flags: dict[str, set[str]] = {}
    for algorithm in algorithms():
        for flag in algorithm.flags:
            if flag.parameter is not None and "_" in flag.parameter:
                flags.setdefault(flag.parameter, set()).add(flag.name)
    return {parameter: names.pop() for parameter, names in flags.items() if len(names) == 1}
