"""The command line's parser and entry point: ``python -m skfedkt`` or ``skfedkt run``, the
federated experiment runner, and the deployment commands.

With no arguments it compares the registered algorithms' default methods and the papers'
baselines on ``digits`` split into 10 Dirichlet(0.5) parties, with random forests, over
3 trials, and prints the table. The algorithms, their flags and their methods come from
their declarations (`skfedkt._registry`).
"""

import argparse
import re
import sys
import warnings
from contextlib import contextmanager

from tqdm import tqdm

from .._version import __version__
from .._deployment._upload import UploadError
from ..datasets import DATASETS
from .._registry import OptionError, fraction, methods
from .._registry import positive as positive_number
from ._deploy import HANDLERS, HelpFormatter, add_deploy_commands
from ._estimators import ESTIMATORS
from ._flags import add_algorithm_flags, algorithm_options, argparse_type, parameter_flags
from ._progress import StageLines, on_a_terminal, shortened
from ._runner import (
    default_methods,
    describe,
    method_names,
    plot_results,
    run_experiment,
    summary_table,
    write_csv,
)


def positive(kind):
    """An argparse type: a number of `kind` above 0."""
    return argparse_type(positive_number(kind))


class _Parser(argparse.ArgumentParser):
    """Bad arguments end with one clear line on stderr and exit status 2."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message}\n")


def _references(text):
    """--audit's value: a number of reference fits (0: the loss attack alone), or
    'off'."""
    if text.strip() == "off":
        return None
    return 0 if text.strip() == "0" else positive(int)(text)


class _TrialsBar(tqdm):
    """A progress bar that estimates the time left once a whole trial is fit, from the
    mean time of a trial: the methods' fits differ a hundredfold (the first method's, which
    also starts the workers, against a centralized forest), so a rate from the first
    fits, or tqdm's smoothed rate of the last few, misjudges the rest by minutes."""

    _WAITING = "{l_bar}{bar}| {n_fmt}/{total_fmt} [{elapsed}, time left after the first " \
               "trial{postfix}]"

    def __init__(self, *args, per_trial, **kwargs):
        super().__init__(*args, smoothing=0, bar_format=self._WAITING, **kwargs)
        self.per_trial = per_trial

    def set_postfix_str(self, s="", refresh=True):
        super().set_postfix_str(shortened(s), refresh)

    def update(self, n=1):
        if self.n + n >= self.per_trial:
            self.bar_format = None  # tqdm's own, with the mean rate since the start
        return super().update(n)


def build_parser():
    parser = _Parser(
        prog="skfedkt",
        description="Federated learning by knowledge transfer: run the papers' comparisons.",
    )
    parser.add_argument("--version", action="version", version=f"skfedkt {__version__}")
    commands = parser.add_subparsers(dest="command", parser_class=_Parser)
    run = commands.add_parser(
        "run", help="compare algorithms on one dataset (the default command)",
        formatter_class=HelpFormatter,
        description="Compare federated algorithms and baselines on one dataset: mean ± "
        "std test accuracy over trials, fit time, bytes each party uploads, epsilon.",
    )
    _add_run_arguments(run)
    add_deploy_commands(commands, add_algorithm_arguments, positive)
    return parser


def _add_run_arguments(run):
    data = run.add_argument_group("data")
    data.add_argument("--dataset", choices=DATASETS, default="digits",
                      help="adult, cod-rna, covtype, mnist, svhn and cifar10 need "
                      "--data-path or the network; file is a CSV or LIBSVM file of your "
                      "own at --data-path, its label in the last column")
    data.add_argument("--data-path", help="local LIBSVM or CSV file (UCI's adult.data too) "
                      "for adult, cod-rna, covtype and file; the folder of the distributed "
                      "files for mnist, svhn, cifar10")
    data.add_argument("--party-column", metavar="NAME",
                      help="with --dataset file: the column of the CSV header that names "
                      "each row's party (then --parties, --beta and --iid are not used); "
                      "without it the rows are split into parties as --beta or --iid say")
    data.add_argument("--parties", type=positive(int), default=None,
                      help="number of parties; default: "
                      + ", ".join(f"{n} for {d}" for d, n in DEFAULT_PARTIES.items())
                      + ", 10 otherwise")
    data.add_argument("--beta", type=positive(float), default=0.5,
                      help="Dirichlet concentration of the label skew (small: strong skew)")
    data.add_argument("--min-party-size", type=positive(int), default=10,
                      help="smallest party a Dirichlet draw may give")
    data.add_argument("--iid", action="store_true", help="split rows evenly at random")
    data.add_argument("--public-fraction", type=argparse_type(fraction(closed=False)), default=0.125,
                      help="share of the rows held out as the unlabelled public set")
    data.add_argument("--test-fraction", type=argparse_type(fraction(closed=False)), default=0.125,
                      help="share of the rows held out for testing")
    data.add_argument("--n-samples", type=positive(int), default=10000,
                      help="rows of the synthetic dataset")

    models = run.add_argument_group("models")
    models.add_argument("--algorithms", nargs="+", choices=method_names(),
                        default=default_methods(), metavar="ALGORITHM",
                        help="; ".join(f"{name}: {describe(name)}" for name in method_names()))
    models.add_argument("--trees", type=positive(int), default=None,
                        help=f"trees of --estimator rf: {MAIN_JOB_TREES} by default, so "
                        "that the main job answers within half a minute; the papers' "
                        "forest has 100 (--trees 100: the full benchmark, minutes)")
    models.add_argument("--trials", type=positive(int), default=3,
                        help="random splits and partitions; the table gives mean ± std")
    models.add_argument("--n-jobs", type=int, default=-1,
                        help="parallel jobs inside every fit (-1: all cores)")
    add_algorithm_arguments(run, deployed=False)

    models.add_argument("--audit", type=_references, metavar="N", default=0,
                        help="attack every federated fit by membership inference, with N "
                        "reference fits (0: the loss attack alone, the cheapest that "
                        "ranks the methods), and print the AUCs; 'off': no attack")

    output = run.add_argument_group("output")
    output.add_argument("--output", help="write one CSV line per algorithm and trial")
    output.add_argument("--plot", help="save a bar chart of the accuracies (PNG, PDF...)")
    output.add_argument("--quiet", action="store_true", help="no progress bar")


def add_algorithm_arguments(parser, deployed):
    """The algorithms' parameters: every registered algorithm's flags in the runner,
    those of the deployed ones in the party, server and audit commands."""
    parser.add_argument("--estimator", choices=sorted(ESTIMATORS), default="rf",
                        help="the model of every algorithm: random forest, decision tree, "
                        "logistic regression, histogram gradient boosting, MLP, XGBoost")
    add_algorithm_flags(parser, deployed)


# the main job's forest: the papers' 100 trees took 83-103 s on an idle 2-core machine,
# nearly all of it in scikit-learn's cost per tree (validation, a clone per tree)
MAIN_JOB_TREES = 10
# the paper's 50 parties for its Adult and cod-rna (Table 4); iris and wine are too small
# for 10 Dirichlet parties of at least 10 rows each
DEFAULT_PARTIES = {"adult": 50, "cod-rna": 50, "iris": 3, "wine": 4}
# the library's parameter names in errors, as the flags a user of the runner types
_FLAGS = {"min_party_size": "--min-party-size", "n_parties": "--parties", "beta": "--beta",
          "n_samples": "--n-samples", "public_fraction": "--public-fraction",
          "test_fraction": "--test-fraction", "party_column": "--party-column"}


def _in_flags(message):
    for name, flag in {**_FLAGS, **parameter_flags()}.items():
        message = re.sub(rf"\b{name}\b", flag, message)
    return message


@contextmanager
def _warnings_as_lines(command):
    """Every warning a command raises, as one clean line on stderr (no source lines)."""

    def show(message, category, filename, lineno, file=None, line=None):
        print(f"skfedkt {command}: warning: {message}", file=sys.stderr)

    with warnings.catch_warnings():
        warnings.showwarning = show
        yield


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser()
    if not argv or argv[0].startswith("-") and argv[0] not in ("-h", "--help", "--version"):
        argv = ["run", *argv]
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        # --help, --version or a bad argument: argparse's status, returned as the
        # refusals below return theirs
        return exc.code if isinstance(exc.code, int) else 0
    if hasattr(args, "estimator"):  # a command that fits an algorithm
        try:
            args.options = algorithm_options(args)
        except OptionError as exc:
            print(f"skfedkt {args.command}: error: {exc}", file=sys.stderr)
            return 2
    if args.command is None:
        parser.print_help()
        return 0
    if args.command != "run":
        try:
            with _warnings_as_lines(args.command):
                return HANDLERS[args.command](args)
        except (ValueError, TypeError, UploadError, OSError) as exc:
            print(f"skfedkt {args.command}: error: {exc}", file=sys.stderr)
            return 1
    declared = methods()
    needs = {name: declared[name].needs_estimator for name in args.algorithms
             if name in declared and declared[name].needs_estimator}
    for needed, why in set(needs.values()):
        if args.estimator != needed:
            names = [name for name, need in needs.items() if need == (needed, why)]
            print(f"skfedkt run: error: {why.format(names=', '.join(names))}: add "
                  f"--estimator {needed} (got {args.estimator}), or run them apart from the "
                  "other models' algorithms", file=sys.stderr)
            return 2
    if args.trees is not None and args.estimator != "rf":
        print(f"skfedkt run: error: --trees sets the forest of --estimator rf; the "
              f"estimator is {args.estimator}", file=sys.stderr)
        return 2
    estimator_params = ({"n_estimators": args.trees or MAIN_JOB_TREES}
                        if args.estimator == "rf" else {})
    if args.parties is None:
        args.parties = DEFAULT_PARTIES.get(args.dataset, 10)
    if args.plot:
        try:
            import matplotlib  # noqa: F401  (checked before any fit)
        except ImportError:
            print("skfedkt run: error: --plot needs matplotlib: pip install matplotlib",
                  file=sys.stderr)
            return 1
    dataset_options = dict(
        n_parties=args.parties, beta=args.beta, min_party_size=args.min_party_size,
        partition="iid" if args.iid else "dirichlet",
        public_fraction=args.public_fraction, test_fraction=args.test_fraction,
    )
    if args.dataset == "synthetic":
        dataset_options["n_samples"] = args.n_samples
    if args.data_path is not None:
        dataset_options["path"] = args.data_path
    if args.party_column is not None:
        dataset_options["party_column"] = args.party_column
    split = ("IID" if args.iid else f"Dirichlet beta={args.beta:g}")
    print(f"{args.dataset}: "
          + (f"the parties of column {args.party_column!r}" if args.party_column
             else f"{args.parties} parties ({split})") + ", "
          f"estimator {args.estimator}"
          + (f" ({estimator_params['n_estimators']} trees)" if estimator_params else "")
          + f", {args.trials} trial(s)", flush=True)
    bars = []

    def make_progress(total):
        # a bar where a person watches; a line per stage where a log records stderr
        bars.append(StageLines("fitting", total)
                    if not (args.quiet or on_a_terminal(sys.stderr)) else
                    _TrialsBar(total=total, per_trial=len(args.algorithms),
                               disable=args.quiet, desc="fitting", unit="fit",
                               file=sys.stderr))
        return bars[-1]

    try:
        try:
            results = run_experiment(
                dataset=args.dataset, estimator=args.estimator, algorithms=args.algorithms,
                n_trials=args.trials, dataset_options=dataset_options,
                algorithm_options=args.options, n_jobs=args.n_jobs,
                make_progress=make_progress, audit=args.audit,
                estimator_params=estimator_params,
            )
        finally:
            # an error is printed on a line of its own, not on the bar's
            for bar in bars:
                bar.close()
        print(summary_table(results, args.algorithms))
        if args.output:
            write_csv(results, args.output)
            print(f"wrote {args.output}")
        if args.plot:
            plot_results(results, args.algorithms, args.plot)
            print(f"wrote {args.plot}")
    except (ValueError, FileNotFoundError, OSError) as exc:
        print(f"skfedkt run: error: {_in_flags(str(exc))}", file=sys.stderr)
        return 1
    return 0

