"""FedCT on the command line: its flags and its configuration in ``skfedkt run``."""

from .._privacy._mechanisms import BitFlips, TeacherVotes
from .._registry import Algorithm, Method, OptionError, positive, register
from ._classifier import FedCTClassifier


def add_options(group):
    group.add_argument("--rounds", type=positive(int), default=20,
                       help="largest number of co-training rounds")
    group.add_argument("--dp-epsilon", type=positive(float),
                       help="per-round epsilon of the bit flips on shared labels; with "
                       "--dp-teachers, the budget of the whole fit")
    group.add_argument("--dp-sensitivity", type=positive(float),
                       help="bits one example may change (default: 2 x public rows)")
    group.add_argument("--dp-teachers", type=positive(int),
                       help="share the noisy votes of this many disjoint teachers per "
                       "party (TeacherVotes) instead of bit-flipped labels")


def options(args):
    """FedCT's rounds and privacy: bit flips from --dp-epsilon, or the votes of
    --dp-teachers."""
    if args.dp_sensitivity is not None and args.dp_epsilon is None:
        raise OptionError("--dp-sensitivity sets the bit flips of --dp-epsilon; give both, "
                          "or neither")
    if args.dp_teachers is not None and (args.dp_epsilon is None
                                         or args.dp_sensitivity is not None):
        raise OptionError("--dp-teachers shares noisy teacher votes within the budget "
                          "--dp-epsilon, whose sensitivity is bounded by construction: "
                          "give --dp-epsilon, and no --dp-sensitivity")
    if args.dp_epsilon is None:
        privacy = None
    elif args.dp_teachers is not None:
        privacy = TeacherVotes(args.dp_epsilon, n_teachers=args.dp_teachers)
    else:
        privacy = BitFlips(args.dp_epsilon, sensitivity=args.dp_sensitivity)
    return dict(n_rounds=args.rounds, privacy=privacy)


register(Algorithm(
    name="fedct", estimator_class=FedCTClassifier, title="FedCT", listed=20,
    add_options=add_options, options=options,
    accountant="FedCT the smaller of pure and RDP composition of its bit flips",
    methods=(Method(
        "fedct", "FedCT: co-training rounds on the public set, a model per party",
        lambda estimator, options, common: FedCTClassifier(estimator, **options["fedct"],
                                                           **common),
        by_default=True),),
))
