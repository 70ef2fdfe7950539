"""The command line's parser and entry point: ``python -m skfedkt`` or ``skfedkt run``, the
federated experiment runner, and the deployment commands.

With no arguments it compares FedKT, FedCT, one-shot ensembles and the papers' baselines
on ``digits`` split into 10 Dirichlet(0.5) parties, with random forests, over 3 trials,
and prints the table.
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
from ..privacy import BitFlips, PartyNoise, ServerNoise, TeacherVotes
from ._deploy import HANDLERS, HelpFormatter, add_deploy_commands
from ._registry import ALGORITHMS, AVERAGING, DESCRIPTIONS, ESTIMATORS
from ._runner import plot_results, run_experiment, summary_table, write_csv


class _Parser(argparse.ArgumentParser):
    """Bad arguments end with one clear line on stderr and exit status 2."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message}\n")


def _positive(kind):
    def parse(text):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if value <= 0:
            raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
        return value

    return parse


def _teachers(text):
    if text == "auto":
        return text
    try:
        return _positive(int)(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(f"must be 'auto' or a number > 0, got {text!r}") \
            from None


def _non_negative(text):
    return 0 if text.strip() == "0" else _positive(int)(text)


def _fraction(closed):
    def parse(text):
        value = _positive(float)(text)
        if value > 1 or (value == 1 and not closed):
            raise argparse.ArgumentTypeError(f"must be {'<=' if closed else '<'} 1, got {text}")
        return value

    return parse


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
    add_deploy_commands(commands, add_algorithm_arguments, _positive)
    return parser


def _add_run_arguments(run):
    data = run.add_argument_group("data")
    data.add_argument("--dataset", choices=DATASETS, default="digits",
                      help="adult, cod-rna, covtype, mnist, svhn and cifar10 need "
                      "--data-path or the network")
    data.add_argument("--data-path", help="local LIBSVM or CSV file (UCI's adult.data too) "
                      "for adult, cod-rna, covtype; the folder of the distributed files "
                      "for mnist, svhn, cifar10")
    data.add_argument("--parties", type=_positive(int), default=None,
                      help="number of parties; default: "
                      + ", ".join(f"{n} for {d}" for d, n in DEFAULT_PARTIES.items())
                      + ", 10 otherwise")
    data.add_argument("--beta", type=_positive(float), default=0.5,
                      help="Dirichlet concentration of the label skew (small: strong skew)")
    data.add_argument("--min-party-size", type=_positive(int), default=10,
                      help="smallest party a Dirichlet draw may give")
    data.add_argument("--iid", action="store_true", help="split rows evenly at random")
    data.add_argument("--public-fraction", type=_fraction(closed=False), default=0.125,
                      help="share of the rows held out as the unlabelled public set")
    data.add_argument("--test-fraction", type=_fraction(closed=False), default=0.125,
                      help="share of the rows held out for testing")
    data.add_argument("--n-samples", type=_positive(int), default=10000,
                      help="rows of the synthetic dataset")

    models = run.add_argument_group("models")
    models.add_argument("--algorithms", nargs="+", choices=ALGORITHMS,
                        default=["fedkt", "fedkt-paper", "fedct", "oneshot", "ensemble",
                                 "solo", "pate", "central"],
                        metavar="ALGORITHM",
                        help="; ".join(f"{a}: {d}" for a, d in DESCRIPTIONS.items()))
    models.add_argument("--trials", type=_positive(int), default=3,
                        help="random splits and partitions; the table gives mean ± std")
    models.add_argument("--n-jobs", type=int, default=-1,
                        help="parallel jobs inside every fit (-1: all cores)")
    add_algorithm_arguments(run)

    fedavg = run.add_argument_group("FedAvg, FedProx, FedDF, FedKT-Prox (--estimator mlp)")
    fedavg.add_argument("--averaging-rounds", type=_positive(int), default=10,
                        help="rounds of the iterative algorithms (FedKT-Prox's first is "
                        "FedKT)")
    fedavg.add_argument("--local-epochs", type=_positive(int), default=10,
                        help="epochs a party trains in every round (the FedKT paper's 10), "
                        "and the epochs of FedKT-Prox's first model, where its rounds "
                        "start")
    fedavg.add_argument("--mu", type=_positive(float), default=0.1,
                        help="FedProx's proximal weight (the FedKT paper's 0.1)")
    fedavg.add_argument("--distill-epochs", type=_positive(int), default=10,
                        help="epochs FedDF's server trains the average on the public set")

    models.add_argument("--audit", type=_non_negative, metavar="N", default=None,
                        help="attack every federated fit by membership inference, with N "
                        "reference fits (0: the loss attack only), and print the AUCs")

    output = run.add_argument_group("output")
    output.add_argument("--output", help="write one CSV line per algorithm and trial")
    output.add_argument("--plot", help="save a bar chart of the accuracies (PNG, PDF...)")
    output.add_argument("--quiet", action="store_true", help="no progress bar")


def add_algorithm_arguments(parser):
    """The algorithms' parameters, shared by the runner and the party and server steps."""
    parser.add_argument("--estimator", choices=sorted(ESTIMATORS), default="rf",
                        help="the model of every algorithm: random forest, decision tree, "
                        "logistic regression, histogram gradient boosting, MLP, XGBoost")
    fedkt = parser.add_argument_group("FedKT")
    fedkt.add_argument("--students", type=_positive(int), default=2,
                       help="students per party (the paper's s: partitions of its rows)")
    fedkt.add_argument("--teachers", type=_teachers, default="auto",
                       help="teachers per student, each on a disjoint subset of the party's "
                       "rows (the paper's t), or 'auto': from 3 to 5 by the party's rows "
                       "(5 with hard votes or privacy)")
    fedkt.add_argument("--voting", choices=["soft", "hard"], default="soft",
                       help="FedKT's votes: class probabilities (soft) or the paper's "
                       "hard votes")
    fedkt.add_argument("--privacy-level", choices=["L0", "L1", "L2"], default="L0",
                       help="L1: Laplace noise at the server (party-level DP); L2: in the "
                       "parties' teacher votes (example-level DP)")
    fedkt.add_argument("--gamma", type=_positive(float), default=NOISE_FLAGS["gamma"],
                       help="inverse noise scale (Laplace scale, Gaussian std: 1/gamma): "
                       "larger is less noise, larger epsilon")
    fedkt.add_argument("--noise", choices=["laplace", "gaussian"],
                       default=NOISE_FLAGS["noise"],
                       help="noise on the counts at L1/L2: the paper's Laplace, or Gaussian "
                       "(GNMax) with exact composition")
    fedkt.add_argument("--query-fraction", type=_fraction(closed=True),
                       default=NOISE_FLAGS["query_fraction"],
                       help="share of the public set the noisy tier labels")

    fedct = parser.add_argument_group("FedCT")
    fedct.add_argument("--rounds", type=_positive(int), default=20,
                       help="largest number of co-training rounds")
    fedct.add_argument("--dp-epsilon", type=_positive(float),
                       help="per-round epsilon of the bit flips on shared labels; with "
                       "--dp-teachers, the budget of the whole fit")
    fedct.add_argument("--dp-sensitivity", type=_positive(float),
                       help="bits one example may change (default: 2 x public rows)")
    fedct.add_argument("--dp-teachers", type=_positive(int),
                       help="share the noisy votes of this many disjoint teachers per "
                       "party (TeacherVotes) instead of bit-flipped labels")

    oneshot = parser.add_argument_group("one-shot ensemble")
    oneshot.add_argument("--selection", choices=["all", "cv", "data", "random"], default="cv",
                         help="which local models form the ensemble")
    oneshot.add_argument("--n-selected", type=_positive(int), default=5,
                         help="ensemble size for cv, data and random selection")
    oneshot.add_argument("--min-samples", type=_positive(int), default=1,
                         help="parties with fewer rows send no model")


NOISE_FLAGS = {"gamma": 0.05, "noise": "laplace", "query_fraction": 1.0}
NOISE_AT = {"L1": ServerNoise, "L2": PartyNoise}


def _noise_flags_without_noise(args):
    """The noise flags given a value at --privacy-level L0, where they mean nothing."""
    if getattr(args, "privacy_level", None) != "L0":
        return []
    return ["--" + name.replace("_", "-") for name, default in NOISE_FLAGS.items()
            if getattr(args, name) != default]


def _fedct_privacy(args):
    """FedCT's privacy from --dp-epsilon: bit flips, or the votes of --dp-teachers."""
    if args.dp_epsilon is None:
        return None
    if args.dp_teachers is not None:
        return TeacherVotes(args.dp_epsilon, n_teachers=args.dp_teachers)
    return BitFlips(args.dp_epsilon, sensitivity=args.dp_sensitivity)


def algorithm_options(args):
    """Each algorithm's keyword arguments from the parsed flags."""
    noise = NOISE_AT.get(args.privacy_level)
    return {
        "fedkt": dict(n_students=args.students, n_teachers=args.teachers, voting=args.voting,
                      privacy=None if noise is None else noise(
                          gamma=args.gamma, noise=args.noise,
                          query_fraction=args.query_fraction)),
        "fedct": dict(n_rounds=args.rounds, privacy=_fedct_privacy(args)),
        "oneshot": dict(selection=args.selection, n_selected=args.n_selected,
                        min_samples=args.min_samples),
        # the runner's alone: no deployment command runs them
        "fedavg": dict(n_rounds=getattr(args, "averaging_rounds", None),
                       local_epochs=getattr(args, "local_epochs", None),
                       proximal_mu=getattr(args, "mu", None),
                       distill_epochs=getattr(args, "distill_epochs", None)),
    }


# the paper's 50 parties for its Adult and cod-rna (Table 4); iris and wine are too small
# for 10 Dirichlet parties of at least 10 rows each
DEFAULT_PARTIES = {"adult": 50, "cod-rna": 50, "iris": 3, "wine": 4}
# the library's parameter names in errors, as the flags a user of the runner types
_FLAGS = {"min_party_size": "--min-party-size", "n_parties": "--parties", "beta": "--beta",
          "n_samples": "--n-samples", "public_fraction": "--public-fraction",
          "test_fraction": "--test-fraction", "n_teachers": "--teachers"}


def _in_flags(message):
    for name, flag in _FLAGS.items():
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
    args = parser.parse_args(argv)
    pointless = _noise_flags_without_noise(args)
    if pointless:
        print(f"skfedkt {args.command}: error: {', '.join(pointless)} set the noise of "
              "--privacy-level L1 or L2; at L0 no noise is added", file=sys.stderr)
        return 2
    if getattr(args, "dp_sensitivity", None) is not None and args.dp_epsilon is None:
        print(f"skfedkt {args.command}: error: --dp-sensitivity sets the bit flips of "
              "--dp-epsilon; give both, or neither", file=sys.stderr)
        return 2
    if getattr(args, "dp_teachers", None) is not None and (
            args.dp_epsilon is None or args.dp_sensitivity is not None):
        print(f"skfedkt {args.command}: error: --dp-teachers shares noisy teacher votes "
              "within the budget --dp-epsilon, whose sensitivity is bounded by "
              "construction: give --dp-epsilon, and no --dp-sensitivity", file=sys.stderr)
        return 2
    if args.command is None:
        parser.print_help()
        return 0
    if args.command != "run":
        if hasattr(args, "algorithm"):
            args.options = algorithm_options(args)
        try:
            with _warnings_as_lines(args.command):
                return HANDLERS[args.command](args)
        except (ValueError, TypeError, UploadError, OSError) as exc:
            print(f"skfedkt {args.command}: error: {exc}", file=sys.stderr)
            return 1
    averaging = [name for name in args.algorithms if name in AVERAGING]
    if averaging and args.estimator != "mlp":
        print(f"skfedkt run: error: the iterative algorithms ({', '.join(averaging)}) "
              f"average the weights of an MLP: add --estimator mlp (got "
              f"{args.estimator}), or run them apart from the other models' algorithms",
              file=sys.stderr)
        return 2
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
    print(f"{args.dataset}: {args.parties} parties "
          f"({'IID' if args.iid else f'Dirichlet beta={args.beta:g}'}), "
          f"estimator {args.estimator}, {args.trials} trial(s)", flush=True)
    bars = []

    def make_progress(total):
        bars.append(tqdm(total=total, disable=args.quiet, desc="fitting", unit="fit",
                         file=sys.stderr))
        return bars[-1]

    try:
        try:
            results = run_experiment(
                dataset=args.dataset, estimator=args.estimator, algorithms=args.algorithms,
                n_trials=args.trials, dataset_options=dataset_options,
                algorithm_options=algorithm_options(args), n_jobs=args.n_jobs,
                make_progress=make_progress, audit=args.audit,
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

